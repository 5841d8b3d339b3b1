package diff

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "differences.txt")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadDifferences(t *testing.T) {
	d, err := ReadDifferences(writeFile(t, "# comment\n\na/b deliberate: why\nc bug: what: more\n  d wording: msg\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 3 || d["a/b"].Kind != Deliberate || d["c"].Reason != "what: more" || d["d"].Kind != Wording {
		t.Fatalf("got %+v", d)
	}
	for _, bad := range []string{"a deliberate\n", "a nonsense: x\n", "a bug:\n", "a bug: x\na bug: y\n", "a\n"} {
		if _, err := ReadDifferences(writeFile(t, bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestCompare checks the rules that keep differences.txt honest.
func TestCompare(t *testing.T) {
	corpus := []Entry{{Name: "same"}, {Name: "differs"}, {Name: "wording"}, {Name: "wordingplus"}, {Name: "unrecorded"}}
	rows := Answer{Kind: "rows", Columns: []string{"c counter"}, Rows: [][]string{{"1"}}}
	errA := Answer{Kind: "error", Code: "0x2200", Message: "a"}
	golden := Golden{Entries: []GoldenEntry{
		{"same", rows}, {"differs", rows}, {"wording", errA}, {"wordingplus", errA},
	}}
	got := []Answer{
		{Kind: "rows", Columns: []string{"c counter"}, Rows: [][]string{{"1"}}},
		{Kind: "rows", Columns: []string{"c counter"}, Rows: [][]string{{"2"}}},
		{Kind: "error", Code: "0x2200", Message: "b"},
		{Kind: "error", Code: "0x2000", Message: "b"},
		{Kind: "void"},
	}
	problems := func(diffs map[string]Difference) map[string]string {
		out := map[string]string{}
		for _, v := range Compare(corpus, got, golden, diffs) {
			if v.Problem != "" {
				out[v.Name] = v.Problem
			}
		}
		return out
	}
	p := problems(nil)
	for _, name := range []string{"differs", "wording", "wordingplus", "unrecorded"} {
		if p[name] == "" {
			t.Errorf("unlisted %s: no problem", name)
		}
	}
	if p["same"] != "" {
		t.Errorf("same: %s", p["same"])
	}
	p = problems(map[string]Difference{
		"same":        {Kind: Bug},
		"differs":     {Kind: Bug},
		"wording":     {Kind: Wording},
		"wordingplus": {Kind: Wording},
		"gone":        {Kind: Deliberate, Line: 7},
	})
	if !strings.Contains(p["same"], "now agrees") {
		t.Errorf("listed but agreeing: %q", p["same"])
	}
	if p["differs"] != "" || p["wording"] != "" {
		t.Errorf("listed differences fail: %v", p)
	}
	if !strings.Contains(p["wordingplus"], "more than the message") {
		t.Errorf("wording listed, code differs: %q", p["wordingplus"])
	}
	if !strings.Contains(p["gone"], "differences.txt:7") {
		t.Errorf("listed entry not in the corpus: %q", p["gone"])
	}
}

// TestCorpus checks the corpus's names are unique and that the golden
// file answers every entry.
func TestCorpus(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range Corpus {
		if e.Name == "" || seen[e.Name] {
			t.Errorf("entry name %q empty or repeated", e.Name)
		}
		seen[e.Name] = true
		if e.Op == OpPage && e.PageSize <= 0 {
			t.Errorf("%s: paged without a page size", e.Name)
		}
	}
	g, err := ReadGolden(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Entries) != len(Corpus) {
		t.Errorf("golden file has %d entries, the corpus %d: re-record it", len(g.Entries), len(Corpus))
	}
	for i, ge := range g.Entries {
		if i < len(Corpus) && ge.Name != Corpus[i].Name {
			t.Errorf("golden entry %d is %s, corpus entry %s: re-record it", i, ge.Name, Corpus[i].Name)
		}
	}
}

func TestEqualEmptyRows(t *testing.T) {
	if eq, w := Equal(Answer{Kind: "rows", Rows: [][]string{}}, Answer{Kind: "rows"}); !eq || w {
		t.Errorf("empty and absent rows: equal %v wording %v", eq, w)
	}
}
