package reset

import (
	"maps"
	"slices"
)

// alg2 is Algorithm 2 of the paper, the form that never deletes an entry,
// generalised to weighted increments as Algorithm 1 is here: the shadow the
// randomized checker runs beside every replica to check Proposition 4.2.
type alg2 struct {
	self ID
	c    map[ID]uint64
	m    map[string]map[ID]pnc
}

func newAlg2(self ID) *alg2 {
	return &alg2{self: self, c: map[ID]uint64{}, m: map[string]map[ID]pnc{}}
}

// genInc is the inc generator: the op's p and start flag.
func (a *alg2) genInc(key string, w uint64) (uint64, bool) {
	e, ok := a.m[key][a.self]
	if !ok || e.p == e.n {
		return a.c[a.self] + w, true
	}
	return e.p + w, false
}

func (a *alg2) effInc(j ID, key string, p, w uint64, start bool) {
	c := a.c[j] + w
	m := a.m[key]
	if m == nil {
		m = map[ID]pnc{}
		a.m[key] = m
	}
	add := pnc{p, 0, c}
	if start {
		add.n = p - w
	}
	m[j] = maxPNC(m[j], add)
	a.c[j] = c
}

// observe is the reset generator for one counter: entries that are not
// fully reset with every cancelled increment received.
func (a *alg2) observe(key string) []Observed {
	var out []Observed
	m := a.m[key]
	for _, j := range slices.SortedFunc(maps.Keys(m), ID.Compare) {
		e := m[j]
		if e.p == e.n && e.c <= a.c[j] {
			continue
		}
		out = append(out, Observed{j, e.p, e.c})
	}
	return out
}

func (a *alg2) effReset(key string, obs []Observed) {
	m := a.m[key]
	if m == nil {
		m = map[ID]pnc{}
		a.m[key] = m
	}
	for _, o := range obs {
		m[o.ID] = maxPNC(m[o.ID], pnc{o.P, o.P, o.C})
	}
}

func (a *alg2) apply(op Op) {
	if op.Kind == OpInc {
		a.effInc(op.From, op.Key, op.P, op.W, op.Start)
		return
	}
	for _, kc := range op.Reset.Keys {
		a.effReset(kc.Key, kc.Entries)
	}
}

func (a *alg2) value(key string) uint64 {
	var v uint64
	for _, e := range a.m[key] {
		v += e.p - e.n
	}
	return v
}
