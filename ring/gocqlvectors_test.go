package ring

import "testing"

// gocql v1.7.0 keeps its Murmur3 in an internal package (internal/murmur) and
// exports no way to compute a key's token without a live session: its
// partitioner and token types are unexported and TokenAwareHostPolicy needs
// hosts whose tokens only a session can set. So instead of calling gocql, this
// test checks Token against the vectors of gocql's own
// internal/murmur/murmur_test.go (v1.7.0), which its Murmur3H1 must meet;
// they include a key with bytes >= 0x80 in the tail. gocql's Murmur3H1
// neither maps the empty key to MinToken nor MinToken to MaxToken, so the
// empty-key vector (0) is left out; no other vector is affected.
func TestTokenGocqlVectors(t *testing.T) {
	prefixes := []uint64{
		// "" → 0x0000000000000000 in gocql; Token("") is MinToken.
		0x2ac9debed546a380, // "0"
		0x649e4eaa7fc1708e, // "01"
		0xce68f60d7c353bdb, // "012"
		0x0f95757ce7f38254, // "0123"
		0x0f04e459497f3fc1, // "01234"
		0x88c0a92586be0a27, // "012345"
		0x13eb9fb82606f7a6, // "0123456"
		0x8236039b7387354d, // "01234567"
		0x4c1e87519fe738ba, // "012345678"
		0x3f9652ac3effeb24, // "0123456789"
		0x3f33760ded9006c6, // "01234567890"
		0xaed70a6631854cb1, // "012345678901"
		0x8a299a8f8e0e2da7, // "0123456789012"
		0x624b675c779249a6, // "01234567890123"
		0xa4b203bb1d90b9a3, // "012345678901234"
		0xa3293ad698ecb99a, // "0123456789012345"
		0xbc740023dbd50048, // "01234567890123456"
		0x3fe5ab9837d25cdd, // "012345678901234567"
		0x2d0338c1ca87d132, // "0123456789012345678"
	}
	const digits = "0123456789012345678"
	for i, want := range prefixes {
		key := digits[:i+1]
		if got := Token([]byte(key)); got != int64(want) {
			t.Errorf("Token(%q) = %#x, gocql's vector %#x", key, uint64(got), want)
		}
	}
	for _, c := range []struct {
		key  []byte
		want int64
	}{
		{[]byte("hello"), -3758069500696749310}, // 0xcbd8a7b341bd9b02
		{[]byte("hello, world"), 0x342fac623a5ebc8e},
		{[]byte("19 Jan 2038 at 3:14:07 AM"), -5143575280686223364},                    // 0xb89e5988b737affc
		{[]byte("The quick brown fox jumps over the lazy dog."), -3631792323850337591}, // 0xcd99481f9ee902c9
		// TestMurmur3H1_CassandraSign: tail bytes 8b b8 are sign-extended.
		{mustHex("00104327529fb645dd00b883ec39ae448bb800000400066a6b00"), -9223371632693506265},
	} {
		if got := Token(c.key); got != c.want {
			t.Errorf("Token(%x) = %d, gocql's vector %d", c.key, got, c.want)
		}
	}
}
