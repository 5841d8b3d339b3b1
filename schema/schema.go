// Package schema keeps the cluster's schema on one node: keyspaces with
// their replication and tables with their columns, persisted in the data
// directory and applied to the local replica. The document is a state-based
// CRDT (creations and drops are unions), so nodes agree by exchanging it.
//
// A keyspace name can be dropped and created again: each incarnation of a
// name has a generation (0 for the first), a drop records the highest
// generation dropped per name, and a keyspace is visible iff its generation
// is above the name's dropped generation (or the name was never dropped).
// CREATE KEYSPACE of a dropped name takes the dropped generation + 1. A
// table belongs to the incarnation it was created in (coltype.TableDef's
// KeyspaceGeneration): it is visible only while that incarnation is, so a
// table of a dropped incarnation, even one created concurrently elsewhere
// and merged later, never shows in a new one, and its data (kept by table
// id, and a new table always has a new id) is dropped by the replica.
//
// The document's JSON (cluster_schema.json in the data directory, and the
// document nodes pull from each other) is:
//
//	{"keyspaces": {"ks": {"name": "ks", ..., "generation": 1}},
//	 "tables": {"5": {"id": 5, "keyspace": "ks", ..., "keyspace_generation": 1}},
//	 "dropped_keyspaces": {"ks": true},
//	 "dropped_keyspace_generations": {"ks": 0},
//	 "dropped_tables": {"5": true}}
//
// A table's entry is coltype.TableDef's JSON: "columns" (name, type: a
// counter design or "regular", and for a regular column "cql", its CQL
// type), "partition_key", "clustering" (name, type, and "desc": true for a
// descending column), "dropped_columns" (a column's entry and its
// "dropped_at" in microseconds), "options", "revision". Every field added
// since the first version is omitted when empty, so a table of counters
// without clustering columns encodes as it did.
//
// "generation" and "keyspace_generation" are omitted when 0.
// "dropped_keyspaces" holds true for every name ever dropped (generation 0
// at least), as versions before reuse wrote it, so that a document without
// reuse is encoded as before and an older node reading a newer one still
// sees every dropped name as dropped (it shows a re-created keyspace as
// dropped, and never shows dropped data); "dropped_keyspace_generations"
// holds the highest generation dropped for names where it is above 0. An
// older document without it loads as "generation 0 dropped".
package schema

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"sync"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/ring"
	"github.com/idemkv/idemkv/vfs"
)

// Keyspace is a keyspace definition: its name and replication, and the
// generation of this incarnation of the name.
type Keyspace struct {
	Name          string            `json:"name"`
	Class         string            `json:"class"`
	Options       map[string]string `json:"options"`
	DurableWrites bool              `json:"durable_writes"`
	// Generation counts the incarnations of the name: 0 for the first,
	// the highest dropped generation + 1 for one created after a drop.
	Generation uint64 `json:"generation,omitempty"`
}

// Doc is the whole schema of the cluster as one node knows it. It is a
// state-based CRDT, so that nodes agree by exchanging it: a table is
// created once (by its cluster-wide id) and dropped for good; a keyspace
// name has generations, each created once and dropped for good. Merging
// two documents keeps the highest generation of each keyspace name, every
// table, and the union of drops (the highest dropped generation per name).
type Doc struct {
	Keyspaces map[string]Keyspace
	Tables    map[uint64]coltype.TableDef
	// DroppedKeyspaces holds, for every name ever dropped, the highest
	// generation dropped: every generation up to it is dropped.
	DroppedKeyspaces map[string]uint64
	DroppedTables    map[uint64]bool
}

func emptyDoc() Doc {
	return Doc{Keyspaces: map[string]Keyspace{}, Tables: map[uint64]coltype.TableDef{}, DroppedKeyspaces: map[string]uint64{}, DroppedTables: map[uint64]bool{}}
}

// docJSON is the document's encoding (see the package comment).
type docJSON struct {
	Keyspaces          map[string]Keyspace         `json:"keyspaces"`
	Tables             map[uint64]coltype.TableDef `json:"tables"`
	DroppedKeyspaces   map[string]bool             `json:"dropped_keyspaces,omitempty"`
	DroppedGenerations map[string]uint64           `json:"dropped_keyspace_generations,omitempty"`
	DroppedTables      map[uint64]bool             `json:"dropped_tables,omitempty"`
}

// MarshalJSON encodes the document as the package comment shows.
func (d Doc) MarshalJSON() ([]byte, error) {
	j := docJSON{Keyspaces: d.Keyspaces, Tables: d.Tables, DroppedTables: d.DroppedTables}
	for n, g := range d.DroppedKeyspaces {
		if j.DroppedKeyspaces == nil {
			j.DroppedKeyspaces = map[string]bool{}
		}
		j.DroppedKeyspaces[n] = true
		if g > 0 {
			if j.DroppedGenerations == nil {
				j.DroppedGenerations = map[string]uint64{}
			}
			j.DroppedGenerations[n] = g
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes the document, older ones included: a name in
// "dropped_keyspaces" alone has generation 0 dropped.
func (d *Doc) UnmarshalJSON(b []byte) error {
	var j docJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*d = Doc{Keyspaces: j.Keyspaces, Tables: j.Tables, DroppedTables: j.DroppedTables, DroppedKeyspaces: map[string]uint64{}}
	for n, dropped := range j.DroppedKeyspaces {
		if dropped {
			d.DroppedKeyspaces[n] = 0
		}
	}
	for n, g := range j.DroppedGenerations {
		if cur, ok := d.DroppedKeyspaces[n]; !ok || g > cur {
			d.DroppedKeyspaces[n] = g
		}
	}
	return nil
}

// keyspaceVisible reports whether generation gen of keyspace name is in
// force as far as the drops go: above the highest dropped one.
func (d Doc) keyspaceVisible(name string, gen uint64) bool {
	g, dropped := d.DroppedKeyspaces[name]
	return !dropped || gen > g
}

// Version is the schema's digest, formatted as a UUID as Cassandra's
// schema_version is: every node with the same schema has the same version.
func (d Doc) Version() string {
	b, _ := json.Marshal(d.canonical())
	s := sha256.Sum256(b)
	s[6] = s[6]&0x0f | 0x30 // a name-based (version 3 style) UUID
	s[8] = s[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}

// canonical orders everything so that the encoding is deterministic.
func (d Doc) canonical() any {
	type tbl struct {
		ID  uint64
		Def coltype.TableDef
	}
	var ks []Keyspace
	for _, k := range d.Keyspaces {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].Name < ks[j].Name })
	var ts []tbl
	for id, t := range d.Tables {
		ts = append(ts, tbl{id, t})
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].ID < ts[j].ID })
	type gen struct {
		Name string
		Gen  uint64
	}
	var dk []string
	var dg []gen
	for k, g := range d.DroppedKeyspaces {
		dk = append(dk, k)
		if g > 0 {
			dg = append(dg, gen{k, g})
		}
	}
	sort.Strings(dk)
	sort.Slice(dg, func(i, j int) bool { return dg[i].Name < dg[j].Name })
	var dt []uint64
	for t := range d.DroppedTables {
		dt = append(dt, t)
	}
	sort.Slice(dt, func(i, j int) bool { return dt[i] < dt[j] })
	// Without reused names the digest is what it was before generations,
	// so that nodes of both versions agree on the schema version.
	if len(dg) > 0 {
		return []any{ks, ts, dk, dt, dg}
	}
	return []any{ks, ts, dk, dt}
}

// merge returns the union of two documents: the highest generation of every
// keyspace name and every table ever created (one definition per name and
// generation, or per id, chosen deterministically) and every drop (the
// highest dropped generation per name). It never deletes, so that it is
// commutative, associative and idempotent; visible applies the drops.
func (d Doc) merge(o Doc) Doc {
	out := emptyDoc()
	for _, src := range []Doc{d, o} {
		for n, k := range src.Keyspaces {
			if cur, ok := out.Keyspaces[n]; !ok || lessKeyspace(k, cur) {
				out.Keyspaces[n] = k
			}
		}
		for id, t := range src.Tables {
			if cur, ok := out.Tables[id]; !ok || lessTable(t, cur) {
				out.Tables[id] = t
			}
		}
		for n, g := range src.DroppedKeyspaces {
			if cur, ok := out.DroppedKeyspaces[n]; !ok || g > cur {
				out.DroppedKeyspaces[n] = g
			}
		}
		for id := range src.DroppedTables {
			out.DroppedTables[id] = true
		}
	}
	return out
}

// visible is the schema the document describes: the keyspaces whose
// generation is not dropped, and the tables not dropped whose keyspace
// incarnation is the visible one. A table of a dropped incarnation, or of
// one older than the visible keyspace's (whose drop this document may
// lack only if it was built by hand: a generation is created only where
// the one before is dropped), is listed as dropped, so that the replica
// drops its data. A table of an incarnation newer than the keyspace this
// document knows (not possible in documents nodes exchange, which carry
// the keyspace of every table) is neither shown nor dropped.
func (d Doc) visible() Doc {
	out := emptyDoc()
	for n, k := range d.Keyspaces {
		if d.keyspaceVisible(n, k.Generation) {
			out.Keyspaces[n] = k
		}
	}
	for id, t := range d.Tables {
		k, kok := out.Keyspaces[t.Keyspace]
		switch {
		case d.DroppedTables[id] || !d.keyspaceVisible(t.Keyspace, t.KeyspaceGeneration) || (kok && t.KeyspaceGeneration < k.Generation):
			out.DroppedTables[id] = true
		case kok && t.KeyspaceGeneration == k.Generation:
			out.Tables[id] = t
		}
	}
	for n, g := range d.DroppedKeyspaces {
		out.DroppedKeyspaces[n] = g
	}
	for id := range d.DroppedTables {
		out.DroppedTables[id] = true
	}
	return out
}

// lessKeyspace picks one of two definitions of a keyspace name: the higher
// generation (the later incarnation), and between equal generations (a
// keyspace created concurrently with two definitions) deterministically,
// so that every node keeps the same one.
func lessKeyspace(a, b Keyspace) bool {
	if a.Generation != b.Generation {
		return a.Generation > b.Generation
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) < string(y)
}

// lessTable picks one of two definitions of the same table id: the higher
// revision (the later ALTER), and between equal revisions deterministically,
// so that the merge is commutative.
func lessTable(a, b coltype.TableDef) bool {
	if a.Revision != b.Revision {
		return a.Revision > b.Revision
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) < string(y)
}

// schemaFile is the schema document's name in the data directory.
const schemaFile = "cluster_schema.json"

// Schema is a node's schema: the document, persisted in the data directory,
// applied to the local replica's tables.
type Schema struct {
	mu   sync.Mutex
	fsys vfs.FS
	dir  string
	path string
	raw  Doc // everything learned: what is persisted and exchanged
	doc  Doc // raw.visible(): what the node serves
	rep  Store
	// strategies caches each keyspace's parsed replication, rebuilt on
	// every change, since every write needs it.
	strategies map[string]ring.Strategy
	// leaders caches the leader rule of each FBF table, for the same reason.
	leaders  map[uint64]tableLeader
	onChange func(version string)
	// changeMu orders the changes with their OnChange calls: a Merge holds
	// it from its change to the end of its call, so that the last call
	// names the version in force (a node gossips it).
	changeMu sync.Mutex
}

// Store is the local storage engine whose tables the schema keeps in step
// with the document (replica.Replica implements it).
type Store interface {
	Tables() []coltype.TableDef
	CreateTable(d coltype.TableDef) error
	AlterTable(d coltype.TableDef) error
	DropTable(id uint64) error
}

// tableLeader is a table's counter leader rule and where it comes from.
type tableLeader struct {
	rule  coltype.LeaderRule
	src   coltype.RuleSource
	dedup bool // the table deduplicates op ids (an FBF table)
}

// Open loads the schema kept in dir and makes rep's tables match it.
func Open(dir string, rep Store) (*Schema, error) {
	return OpenFS(nil, dir, rep)
}

// OpenFS is Open on the filesystem fsys (nil means vfs.Default).
func OpenFS(fsys vfs.FS, dir string, rep Store) (*Schema, error) {
	fsys = vfs.Or(fsys)
	s := &Schema{fsys: fsys, dir: dir, path: filepath.Join(dir, schemaFile), raw: emptyDoc(), doc: emptyDoc(), rep: rep}
	b, err := fsys.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("schema: read schema: %w", err)
	default:
		var d Doc
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("schema: schema %s is corrupt: %w", s.path, err)
		}
		s.raw = emptyDoc().merge(d)
	}
	// Tables the replica has but the document lacks (a crash between the
	// two writes) are adopted; the document's tables are created locally.
	for _, t := range rep.Tables() {
		if _, ok := s.raw.Tables[t.ID]; !ok {
			s.raw.Tables[t.ID] = t
		}
	}
	if err := s.applyLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// OnChange sets the function called, outside the schema's lock, with the new
// version after every change, one change at a time and in their order: the
// last call names the version in force. The function must not change the
// schema itself.
func (s *Schema) OnChange(fn func(version string)) {
	s.mu.Lock()
	s.onChange = fn
	s.mu.Unlock()
}

// Doc returns a copy of the whole schema document, drops included: what
// nodes exchange.
func (s *Schema) Doc() Doc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return emptyDoc().merge(s.raw)
}

// Visible returns a copy of the schema in force: keyspaces and tables not
// dropped.
func (s *Schema) Visible() Doc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return emptyDoc().merge(s.doc)
}

// Version returns the schema version.
func (s *Schema) Version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw.Version()
}

// Merge folds another node's document into this one; it reports whether
// anything changed.
func (s *Schema) Merge(o Doc) (bool, error) {
	// Without changeMu two merges could call OnChange in the other order,
	// and a node would gossip the older of the two versions for good: its
	// peers, which hold the newer schema, find nothing to pull from it, and
	// a node bootstrapping waited for a schema agreement that never came.
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	s.mu.Lock()
	before := s.raw.Version()
	s.raw = s.raw.merge(o)
	after := s.raw.Version()
	var err error
	if before != after {
		err = s.applyLocked()
	}
	s.mu.Unlock()
	if before != after {
		s.mu.Lock()
		fn := s.onChange
		s.mu.Unlock()
		if fn != nil {
			fn(after)
		}
	}
	return before != after, err
}

// applyLocked persists the document and makes the replica's tables match it.
func (s *Schema) applyLocked() error {
	s.doc = s.raw.visible()
	b, err := json.MarshalIndent(s.raw, "", "  ")
	if err != nil {
		return err
	}
	// Written, synced, renamed and the directory synced: a crash leaves
	// the old document or the new one.
	if err := vfs.WriteFileAtomic(s.fsys, s.dir, schemaFile, b); err != nil {
		return fmt.Errorf("schema: write schema: %w", err)
	}
	s.strategies = map[string]ring.Strategy{}
	for n, k := range s.doc.Keyspaces {
		st, err := ring.ParseStrategy(k.Class, k.Options)
		if err != nil {
			return fmt.Errorf("schema: keyspace %s: %w", n, err)
		}
		s.strategies[n] = st
	}
	s.leaders = map[uint64]tableLeader{}
	for id, t := range s.doc.Tables {
		if rule, src, dedup := coltype.TableLeaderRule(t); dedup || src != coltype.RuleNone {
			s.leaders[id] = tableLeader{rule, src, dedup}
		}
	}
	have := map[uint64]bool{}
	for _, t := range s.rep.Tables() {
		have[t.ID] = true
		if d, ok := s.doc.Tables[t.ID]; ok && d.Revision != t.Revision {
			if err := s.rep.AlterTable(d); err != nil {
				return err
			}
		}
		if s.doc.DroppedTables[t.ID] {
			if err := s.rep.DropTable(t.ID); err != nil {
				return err
			}
		}
	}
	ids := make([]uint64, 0, len(s.doc.Tables))
	for id := range s.doc.Tables {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if !have[id] {
			if err := s.rep.CreateTable(s.doc.Tables[id]); err != nil {
				return err
			}
		}
	}
	return nil
}

// CreateKeyspace adds a keyspace; ifNotExists makes an existing one no error.
func (s *Schema) CreateKeyspace(k Keyspace, ifNotExists bool) error {
	if _, err := ring.ParseStrategy(k.Class, k.Options); err != nil {
		return err
	}
	s.mu.Lock()
	if _, ok := s.doc.Keyspaces[k.Name]; ok {
		s.mu.Unlock()
		if ifNotExists {
			return nil
		}
		return fmt.Errorf("Keyspace %s already exists", k.Name)
	}
	// A dropped name is created again as its next generation; tables of
	// the dropped ones are not in it (see visible).
	k.Generation = 0
	if g, dropped := s.raw.DroppedKeyspaces[k.Name]; dropped {
		k.Generation = g + 1
	}
	d := emptyDoc()
	d.Keyspaces[k.Name] = k
	s.mu.Unlock()
	_, err := s.Merge(d)
	return err
}

// newOption is the capability of table options whose new values are held
// to bounds a stored definition may exceed (the FBF's idempotence option:
// a stored one is loaded clamped).
type newOption interface {
	CheckNew(d coltype.TableDef, value string) error
}

// validateNew checks a new table definition (CREATE or ALTER): Validate,
// and the bounds of its options' new values. Definitions merged from peers
// and loaded at start are only Validated.
func validateNew(t coltype.TableDef) error {
	if err := t.Validate(); err != nil {
		return err
	}
	for name, v := range t.Options {
		o, ok := coltype.LookupOption(name)
		if !ok || v == "" {
			continue
		}
		if n, ok := o.(newOption); ok {
			if err := n.CheckNew(t, v); err != nil {
				return fmt.Errorf("table %s.%s: %w", t.Keyspace, t.Name, err)
			}
		}
	}
	return nil
}

// CreateTable adds a table to an existing keyspace.
func (s *Schema) CreateTable(t coltype.TableDef, ifNotExists bool) error {
	if err := validateNew(t); err != nil {
		return err
	}
	s.mu.Lock()
	if _, ok := s.doc.Keyspaces[t.Keyspace]; !ok {
		s.mu.Unlock()
		return fmt.Errorf("Keyspace %s does not exist", t.Keyspace)
	}
	for _, x := range s.doc.Tables {
		if x.Keyspace == t.Keyspace && x.Name == t.Name {
			s.mu.Unlock()
			if ifNotExists {
				return nil
			}
			return fmt.Errorf("Table %s.%s already exists", t.Keyspace, t.Name)
		}
	}
	// The table belongs to the keyspace's incarnation in force.
	t.KeyspaceGeneration = s.doc.Keyspaces[t.Keyspace].Generation
	d := emptyDoc()
	d.Tables[t.ID] = t
	s.mu.Unlock()
	_, err := s.Merge(d)
	return err
}

// AlterTable replaces a table's options (its id, keyspace, name and columns
// stay) with the next revision.
func (s *Schema) AlterTable(t coltype.TableDef) error {
	if err := validateNew(t); err != nil {
		return err
	}
	s.mu.Lock()
	cur, ok := s.doc.Tables[t.ID]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("Table %s.%s does not exist", t.Keyspace, t.Name)
	}
	t.Revision = cur.Revision + 1
	t.KeyspaceGeneration = cur.KeyspaceGeneration
	d := emptyDoc()
	d.Tables[t.ID] = t
	_, err := s.Merge(d)
	return err
}

// DropTable drops a table by name.
func (s *Schema) DropTable(keyspace, name string, ifExists bool) error {
	s.mu.Lock()
	var id uint64
	for tid, x := range s.doc.Tables {
		if x.Keyspace == keyspace && x.Name == name {
			id = tid
		}
	}
	s.mu.Unlock()
	if id == 0 {
		if ifExists {
			return nil
		}
		return fmt.Errorf("Table %s.%s does not exist", keyspace, name)
	}
	d := emptyDoc()
	d.DroppedTables[id] = true
	_, err := s.Merge(d)
	return err
}

// DropKeyspace drops a keyspace's incarnation in force and its tables: the
// tables known here are listed as dropped, and one created concurrently in
// the same incarnation elsewhere is dropped by its KeyspaceGeneration when
// the documents merge (see visible).
func (s *Schema) DropKeyspace(name string, ifExists bool) error {
	s.mu.Lock()
	k, ok := s.doc.Keyspaces[name]
	d := emptyDoc()
	if ok {
		d.DroppedKeyspaces[name] = k.Generation
		for id, t := range s.doc.Tables {
			if t.Keyspace == name {
				d.DroppedTables[id] = true
			}
		}
	}
	s.mu.Unlock()
	if !ok {
		if ifExists {
			return nil
		}
		return fmt.Errorf("Keyspace %s does not exist", name)
	}
	_, err := s.Merge(d)
	return err
}

// Table finds a table by name.
func (s *Schema) Table(keyspace, name string) (coltype.TableDef, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.doc.Tables {
		if x.Keyspace == keyspace && x.Name == name {
			return x, true
		}
	}
	return coltype.TableDef{}, false
}

// KeyspaceOf returns the keyspace of a table, by id.
func (s *Schema) KeyspaceOf(table uint64) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.doc.Tables[table]
	return t.Keyspace, ok
}

// Strategy returns the replication strategy of a table's keyspace
// (coordinator.Tables).
func (s *Schema) Strategy(table uint64) (ring.Strategy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.doc.Tables[table]
	if !ok {
		return nil, fmt.Errorf("unknown table id %d", table)
	}
	st, ok := s.strategies[t.Keyspace]
	if !ok {
		return nil, fmt.Errorf("table %s.%s: unknown keyspace", t.Keyspace, t.Name)
	}
	return st, nil
}

// Deduplicates reports whether a table's options make its counters
// dismiss retried op ids (the FBF's idempotence option).
func (s *Schema) Deduplicates(table uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaders[table].dedup
}

// LeaderRule returns the counter leader rule of a table and where it comes
// from: an FBF table's idempotence option may set it (leader: first or
// random); otherwise an FBF table's default is first; other tables have
// none (see coltype.RuleSource for the precedence).
func (s *Schema) LeaderRule(table uint64) (coltype.LeaderRule, coltype.RuleSource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.leaders[table]
	if !ok {
		return 0, coltype.RuleNone
	}
	return r.rule, r.src
}
