package reset_test

import (
	"fmt"

	"github.com/idemkv/idemkv/counters/reset"
)

// Three replicas of one counter: five increments everywhere, then an
// increment at a concurrent with a reset at b. The reset cancels what b
// observed, the concurrent increment survives, and only a's entry remains.
func Example() {
	ids := []reset.ID{{1}, {2}, {3}}
	a, b, c := reset.NewCounter(ids[0]), reset.NewCounter(ids[1]), reset.NewCounter(ids[2])
	send := func(op reset.Op, to ...*reset.State) {
		for _, s := range to {
			if err := s.Apply(op); err != nil {
				panic(err)
			}
		}
	}
	for range 5 {
		op, _ := a.Inc("", 1)
		send(op, b, c)
	}
	inc, _ := a.Inc("", 1)
	rst, _ := b.ResetKey("")
	send(rst, a, c) // c gets the reset before the increment
	send(inc, b, c)
	for _, s := range []*reset.State{a, b, c} {
		fmt.Println(s.Value(""), len(s.Entries("")))
	}
	_, err := a.Inc("", -1)
	fmt.Println(err)
	// Output:
	// 1 1
	// 1 1
	// 1 1
	// reset: decrements are not supported by an observed-reset counter
}
