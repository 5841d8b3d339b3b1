package node

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/schema"
)

// TestSchemaEventsKeyspaceCreatedAgain: a keyspace dropped and created
// again between two schema-event computations (a node catching up) is
// announced, drops first: its old table dropped, the keyspace dropped and
// created, its new table created.
func TestSchemaEventsKeyspaceCreatedAgain(t *testing.T) {
	doc := func(gen, table uint64) schema.Doc {
		return schema.Doc{
			Keyspaces: map[string]schema.Keyspace{"ks": {Name: "ks", Class: "SimpleStrategy", Generation: gen}},
			Tables:    map[uint64]coltype.TableDef{table: {ID: table, Keyspace: "ks", Name: "t", KeyspaceGeneration: gen}},
		}
	}
	e := &events{last: doc(0, 5)}
	var got []string
	e.Subscribe(func(ev frame.Event) {
		got = append(got, fmt.Sprintf("%s %s %s.%s", ev.Change, ev.Schema.Target, ev.Schema.Keyspace, ev.Schema.Name))
	})
	e.schemaEvents(doc(1, 6))
	want := "DROPPED TABLE ks.t, DROPPED KEYSPACE ks., CREATED KEYSPACE ks., CREATED TABLE ks.t"
	if s := strings.Join(got, ", "); s != want {
		t.Fatalf("events %s, want %s", s, want)
	}
	got = nil
	e.schemaEvents(doc(1, 6))
	if len(got) != 0 {
		t.Fatalf("no change gave events %v", got)
	}
}
