package sstable

import (
	"errors"
	"os"
	"testing"

	"github.com/idemkv/idemkv/row"
)

// checkNeverWrong opens generation gen of dir and checks that every read
// either fails or returns exactly the written rows: Get of present and
// absent keys, All, and Range. It returns whether some step failed.
func checkNeverWrong(t *testing.T, dir string, gen uint64, rows []row.Row, absent []row.Key, what string) (detected bool) {
	t.Helper()
	r, err := Open(dir, gen)
	if err != nil {
		return true
	}
	defer r.Close()
	verifyErr := r.Verify()
	defer func() {
		// Verify sees every flip of Data and Index, and no other damage
		// (Open has caught that).
		if (verifyErr != nil) != (detected && (what == dataComponent || what == indexComponent)) {
			t.Fatalf("%s: Verify = %v, reads detected damage: %v", what, verifyErr, detected)
		}
	}()
	for _, want := range rows {
		got, ok, err := r.Get(want.Key)
		switch {
		case err != nil:
			detected = true
		case !ok:
			t.Fatalf("%s: Get(%s) reports absent, no error", what, want.Key)
		case !rowEqual(got, want):
			t.Fatalf("%s: Get(%s) returned a wrong row", what, want.Key)
		}
	}
	for _, k := range absent {
		_, ok, err := r.Get(k)
		if err != nil {
			detected = true
		} else if ok {
			t.Fatalf("%s: Get(%s) found an absent key", what, k)
		}
	}
	for i, from := range []int{0, len(rows) / 3, len(rows) - 1} {
		seq := r.All()
		if i > 0 {
			seq = r.Range(rows[from].Key)
		}
		got, err := collect(seq)
		if e := sameRows(got, rows[from:len(got)+from]); len(got)+from > len(rows) || e != nil {
			t.Fatalf("%s: scan %d yielded a wrong row before any error: %v", what, i, e)
		}
		if err != nil {
			detected = true
		} else if len(got) != len(rows)-from {
			t.Fatalf("%s: scan %d ended early without error: %d rows of %d", what, i, len(got), len(rows)-from)
		}
	}
	return detected
}

func TestCorruption(t *testing.T) {
	rng := testRand(t)
	dir := t.TempDir()
	rows := randRows(rng, 150, false)
	rows[7].Cells = append(rows[7].Cells[:0:0], row.Cell{Column: "big", Value: randBytes(rng, 900)})
	const gen = 9
	writeTable(t, dir, gen, rows, Options{BlockSize: 300, IndexInterval: 4}, []byte("replay position"))
	absent := absentKeys(rng, rows, 60)
	if checkNeverWrong(t, dir, gen, rows, absent, "intact") {
		t.Fatal("intact table reported an error")
	}

	const maxFlips = 250 // per component; every byte of smaller files
	for _, comp := range append(components, tocComponent) {
		name := path(dir, gen, comp)
		orig, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		positions := make([]int, 0, len(orig))
		if len(orig) <= maxFlips {
			for i := range orig {
				positions = append(positions, i)
			}
		} else {
			for i := range 16 { // both ends: framing and footers
				positions = append(positions, i, len(orig)-1-i)
			}
			for len(positions) < maxFlips {
				positions = append(positions, rng.IntN(len(orig)))
			}
		}
		mut := make([]byte, len(orig))
		undetected := 0
		for _, pos := range positions {
			copy(mut, orig)
			mut[pos] ^= byte(1 + rng.IntN(255))
			if err := os.WriteFile(name, mut, 0o644); err != nil {
				t.Fatal(err)
			}
			if !checkNeverWrong(t, dir, gen, rows, absent, comp) {
				undetected++
			}
		}
		// Truncations and an extension.
		for _, n := range []int{0, len(orig) - 1, len(orig) / 2, len(orig) + 1} {
			b := make([]byte, n)
			copy(b, orig)
			if err := os.WriteFile(name, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if !checkNeverWrong(t, dir, gen, rows, absent, comp) {
				t.Errorf("%s: resize to %d of %d bytes not detected", comp, n, len(orig))
			}
		}
		if err := os.WriteFile(name, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		// Every byte of every component is covered by a checksum or is
		// compared, so no flip should go unnoticed.
		if undetected > 0 {
			t.Errorf("%s: %d of %d byte flips not detected", comp, undetected, len(positions))
		}
		t.Logf("%s: %d bytes, %d flips", comp, len(orig), len(positions))
	}
}

// TestBlockErrorLocatesDamage flips one byte inside the first data block and
// inside the first index block and checks that Get and All report a
// BlockError naming the file and the block's offset.
func TestBlockErrorLocatesDamage(t *testing.T) {
	rng := testRand(t)
	rows := randRows(rng, 40, false)
	for _, c := range []struct {
		comp, kind string
	}{{dataComponent, "data"}, {indexComponent, "index"}} {
		dir := t.TempDir()
		const gen = 3
		writeTable(t, dir, gen, rows, Options{BlockSize: 200, IndexInterval: 4}, nil)
		name := path(dir, gen, c.comp)
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		b[6] ^= 0x40 // inside the payload of the block at offset 0
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		r := openTable(t, dir, gen)
		_, _, err = r.Get(rows[0].Key)
		var be *BlockError
		if !errors.As(err, &be) || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: Get of the first row: err = %v, want a BlockError wrapping ErrCorrupt", c.comp, err)
		}
		if be.Path != name || be.Offset != 0 || be.Kind != c.kind {
			t.Fatalf("%s: BlockError = {%s %s %d}, want {%s %s 0}", c.comp, be.Path, be.Kind, be.Offset, name, c.kind)
		}
		if c.comp == dataComponent {
			_, err := collect(r.All())
			if !errors.As(err, &be) || be.Path != name || be.Offset != 0 {
				t.Fatalf("All: err = %v, want a BlockError at %s offset 0", err, name)
			}
		}
		r.Close()
	}
}
