package ring

// Reference models: slow, literal transcriptions of Cassandra's algorithms over
// plain maps and the public Ring(), against which the indexed implementations
// are checked on random rings.

// walk returns the ring from the first token >= token, one lap, by linear scan.
func walk(m *Metadata, token int64) []Endpoint {
	r := m.Ring()
	start := 0
	for start < len(r) && r[start].Token < token {
		start++
	}
	out := make([]Endpoint, 0, len(r))
	for k := range r {
		out = append(out, r[(start+k)%len(r)].Endpoint)
	}
	return out
}

// simpleModel is AbstractReplicationStrategy's SimpleStrategy: distinct
// endpoints in walk order until RF.
func simpleModel(m *Metadata, token int64, rf int) []Endpoint {
	var out []Endpoint
	seen := map[Endpoint]bool{}
	for _, e := range walk(m, token) {
		if len(out) >= rf {
			break
		}
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out
}

// topology returns the endpoints and the set of racks of each data center.
func topology(m *Metadata) (nodes map[string]int, racks map[string]map[string]bool) {
	nodes, racks = map[string]int{}, map[string]map[string]bool{}
	for _, e := range m.Endpoints() {
		nodes[e.DC]++
		if racks[e.DC] == nil {
			racks[e.DC] = map[string]bool{}
		}
		racks[e.DC][e.Rack] = true
	}
	return nodes, racks
}

// ntsModel transcribes Cassandra's NetworkTopologyStrategy
// calculateNaturalEndpoints with DatacenterEndpoints (3.x, 4.x, 5.0): one
// walk; per data center rfLeft = min(rf, nodes), acceptableRackRepeats =
// rf - racks; a new rack is always taken, a repeat only while repeats remain.
func ntsModel(m *Metadata, token int64, dcs map[string]int) []Endpoint {
	nodes, racks := topology(m)
	type dcState struct{ rfLeft, repeats int }
	state := map[string]*dcState{}
	for dc, rf := range dcs {
		if rf <= 0 || nodes[dc] == 0 {
			continue
		}
		state[dc] = &dcState{min(rf, nodes[dc]), rf - len(racks[dc])}
	}
	type loc struct{ dc, rack string }
	seenRacks := map[loc]bool{}
	var out []Endpoint
	in := map[Endpoint]bool{}
	toFill := len(state)
	for _, e := range walk(m, token) {
		if toFill == 0 {
			break
		}
		s := state[e.DC]
		if s == nil || s.rfLeft == 0 {
			continue
		}
		if !seenRacks[loc{e.DC, e.Rack}] {
			seenRacks[loc{e.DC, e.Rack}] = true
		} else if s.repeats <= 0 || in[e] {
			continue
		} else {
			s.repeats--
		}
		in[e] = true
		out = append(out, e)
		s.rfLeft--
		if s.rfLeft == 0 {
			toFill--
		}
	}
	return out
}

// ntsSkipModel transcribes the older calculateNaturalEndpoints (2.x/3.0):
// per data center, endpoints of racks already seen are skipped (kept in a
// LinkedHashSet) until every rack of the data center has been seen, then the
// skipped ones are added up to the factor, then any endpoint of the DC.
func ntsSkipModel(m *Metadata, token int64, dcs map[string]int) []Endpoint {
	nodes, racks := topology(m)
	sufficient := func(dc string, got map[Endpoint]bool) bool {
		return len(got) >= min(max(dcs[dc], 0), nodes[dc])
	}
	dcReplicas := map[string]map[Endpoint]bool{}
	seenRacks := map[string]map[string]bool{}
	skipped := map[string][]Endpoint{}
	for dc := range dcs {
		dcReplicas[dc] = map[Endpoint]bool{}
		seenRacks[dc] = map[string]bool{}
	}
	allDone := func() bool {
		for dc := range dcs {
			if !sufficient(dc, dcReplicas[dc]) {
				return false
			}
		}
		return true
	}
	var out []Endpoint
	in := map[Endpoint]bool{}
	add := func(e Endpoint) {
		dcReplicas[e.DC][e] = true
		if !in[e] {
			in[e] = true
			out = append(out, e)
		}
	}
	for _, e := range walk(m, token) {
		if allDone() {
			break
		}
		dc := e.DC
		if _, ok := dcs[dc]; !ok || sufficient(dc, dcReplicas[dc]) {
			continue
		}
		if len(seenRacks[dc]) == len(racks[dc]) {
			add(e)
			continue
		}
		if seenRacks[dc][e.Rack] {
			if !containsEndpoint(skipped[dc], e) {
				skipped[dc] = append(skipped[dc], e)
			}
			continue
		}
		add(e)
		seenRacks[dc][e.Rack] = true
		if len(seenRacks[dc]) == len(racks[dc]) {
			for _, s := range skipped[dc] {
				if sufficient(dc, dcReplicas[dc]) {
					break
				}
				add(s)
			}
		}
	}
	return out
}

func containsEndpoint(es []Endpoint, e Endpoint) bool {
	for _, x := range es {
		if x == e {
			return true
		}
	}
	return false
}
