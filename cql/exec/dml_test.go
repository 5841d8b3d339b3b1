package exec

import (
	"bytes"
	"testing"
)

func TestExchangePayload(t *testing.T) {
	for _, tc := range []struct {
		payload map[string][]byte
		key     string
		ok      bool
	}{
		{nil, "", false},
		{map[string][]byte{"idemkv-op": {1}}, "", false},
		{map[string][]byte{"idemkv-op": {1}, "idemkv-handoff": {2}}, "idemkv-handoff", true},
		{map[string][]byte{"idemkv-borrow": {3}}, "idemkv-borrow", true},
		// Two exchanged keys: the type first by name (borrow_counter
		// before handoff_counter), whatever the map's order.
		{map[string][]byte{"idemkv-handoff": {2}, "idemkv-borrow": {3}}, "idemkv-borrow", true},
	} {
		for range 20 { // map iteration order varies
			key, v, ok := exchangePayload(tc.payload)
			if key != tc.key || ok != tc.ok || ok && !bytes.Equal(v, tc.payload[tc.key]) {
				t.Fatalf("exchangePayload(%v) = %q, %v, %v; want %q, %v", tc.payload, key, v, ok, tc.key, tc.ok)
			}
		}
	}
}
