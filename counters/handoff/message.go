package handoff

import (
	"errors"
	"fmt"
	"slices"
)

// Message is what one handoff counter exchange carries in a deployment (and
// what a server stores for a cell): a counter state or view, and the
// retirement notices the sender holds, each with the bookkeeping that
// disseminates it (HeldNotice). A client sends a Message with its own
// notice when it retires; servers pass the notices they hold to one another
// until every server of the notice has processed it.
type Message struct {
	State   *Counter
	Notices []*HeldNotice // ascending by notice id, at most one per id
}

// HeldNotice is a retirement notice as a server holds it: the servers that
// must process it (the replicas of the cell when it was first received), the
// servers known to have processed it and stored it durably, and when it was
// first received (Unix milliseconds at the first server), from which its
// retention is counted.
type HeldNotice struct {
	Notice  *Notice[Count]
	Servers []ID // ascending
	Seen    []ID // ascending
	Created int64
}

// Done reports whether every server of the notice has processed it.
func (h *HeldNotice) Done() bool {
	for _, s := range h.Servers {
		if _, ok := slices.BinarySearchFunc(h.Seen, s, ID.Compare); !ok {
			return false
		}
	}
	return len(h.Servers) > 0
}

// Clone returns a deep copy.
func (h *HeldNotice) Clone() *HeldNotice {
	return &HeldNotice{Notice: h.Notice.Clone(), Servers: slices.Clone(h.Servers), Seen: slices.Clone(h.Seen), Created: h.Created}
}

// Absorb merges what another copy of the same notice knows into h: the
// union of servers and of the seen sets, the earlier creation time. It
// reports whether h changed.
func (h *HeldNotice) Absorb(o *HeldNotice) bool {
	servers, seen := UnionIDs(h.Servers, o.Servers), UnionIDs(h.Seen, o.Seen)
	changed := len(servers) != len(h.Servers) || len(seen) != len(h.Seen) || (o.Created != 0 && o.Created < h.Created)
	h.Servers, h.Seen = servers, seen
	if o.Created != 0 && (h.Created == 0 || o.Created < h.Created) {
		h.Created = o.Created
	}
	return changed
}

// UnionIDs returns the sorted union of two ascending id lists.
func UnionIDs(a, b []ID) []ID {
	out := make([]ID, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i].Compare(b[j]) < 0:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].Compare(a[i]) < 0:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}

// messageVersion starts an encoded Message. It differs from Version, so a
// decoder tells a Message from a bare state by the first byte.
const messageVersion = 0xe1

// MarshalBinary encodes the message:
//
//	version byte (0xe1)
//	state:   uvarint length, the state's encoding
//	notices: n uvarint, n × (uvarint length, the notice's encoding,
//	         created uvarint, servers: n uvarint + ids, seen: n uvarint + ids)
//
// in ascending notice id, ids ascending and distinct.
func (m *Message) MarshalBinary() ([]byte, error) {
	st, err := m.State.MarshalBinary()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 8+len(st)+64*len(m.Notices))
	b = append(b, messageVersion)
	b = appendUvarint(b, uint64(len(st)))
	b = append(b, st...)
	b = appendUvarint(b, uint64(len(m.Notices)))
	for _, h := range m.Notices {
		nb, err := h.Notice.MarshalBinary()
		if err != nil {
			return nil, err
		}
		b = appendUvarint(b, uint64(len(nb)))
		b = append(b, nb...)
		b = appendUvarint(b, uint64(h.Created))
		for _, ids := range [][]ID{h.Servers, h.Seen} {
			b = appendUvarint(b, uint64(len(ids)))
			for _, id := range ids {
				b = append(b, id[:]...)
			}
		}
	}
	return b, nil
}

// DecodeMessage decodes a Message, or a bare counter state (a Message
// without notices; bare reports which). Bad bytes are an error.
func DecodeMessage(b []byte) (m *Message, bare bool, err error) {
	if len(b) > 0 && b[0] == Version {
		c := NewCounter(ID{}, 0)
		if err := c.UnmarshalBinary(b); err != nil {
			return nil, false, err
		}
		return &Message{State: c}, true, nil
	}
	if len(b) == 0 || b[0] != messageVersion {
		return nil, false, errors.New("handoff: neither a message nor a state")
	}
	b = b[1:]
	sb, b, err := readBytes(b)
	if err != nil {
		return nil, false, err
	}
	m = &Message{State: NewCounter(ID{}, 0)}
	if err := m.State.UnmarshalBinary(sb); err != nil {
		return nil, false, err
	}
	n, b, err := readCount(b, 2+IDLen+3)
	if err != nil {
		return nil, false, err
	}
	for i := range n {
		h := &HeldNotice{Notice: &Notice[Count]{}}
		var nb []byte
		if nb, b, err = readBytes(b); err != nil {
			return nil, false, err
		}
		if err := h.Notice.UnmarshalBinary(nb); err != nil {
			return nil, false, err
		}
		if i > 0 && m.Notices[i-1].Notice.ID.Compare(h.Notice.ID) >= 0 {
			return nil, false, errors.New("handoff: message notices not in strictly ascending order")
		}
		var created uint64
		if created, b, err = readUvarint(b); err != nil {
			return nil, false, err
		}
		if created > 1<<62 {
			return nil, false, fmt.Errorf("handoff: notice created at %d", created)
		}
		h.Created = int64(created)
		for _, ids := range []*[]ID{&h.Servers, &h.Seen} {
			var k int
			if k, b, err = readCount(b, IDLen); err != nil {
				return nil, false, err
			}
			var prev ID
			for j := range k {
				var id ID
				if id, b, err = readID(b, prev, j > 0); err != nil {
					return nil, false, err
				}
				prev = id
				*ids = append(*ids, id)
			}
		}
		m.Notices = append(m.Notices, h)
	}
	if len(b) != 0 {
		return nil, false, errors.New("handoff: trailing bytes after the message")
	}
	return m, false, nil
}

// readBytes reads a uvarint length and that many bytes.
func readBytes(b []byte) ([]byte, []byte, error) {
	n, b, err := readUvarint(b)
	if err != nil {
		return nil, nil, err
	}
	if n > uint64(len(b)) {
		return nil, nil, errCorrupt
	}
	return b[:n], b[n:], nil
}
