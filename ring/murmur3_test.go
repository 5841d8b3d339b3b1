package ring

import (
	"bytes"
	"encoding/hex"
	"math"
	"testing"

	"github.com/spaolacci/murmur3"
)

// Vectors from the DataStax C# driver's TokenTests ("inputs and result values
// from Cassandra"; see docs/references.md), and derived extras.
func TestTokenCassandraVectors(t *testing.T) {
	seq := make([]byte, 16)
	for i := range seq {
		seq[i] = byte(i + 1)
	}
	cases := []struct {
		key  []byte
		want int64
	}{
		{seq, -5563837382979743776},
		{make([]byte, 16), 5457549051747178710},
		{bytes.Repeat([]byte{0xff}, 16), -2824192546314762522},
		{bytes.Repeat([]byte{0xfe}, 17), -1672437813826982685},
		{mustHex("fefefefe"), 4566408979886474012},
		{mustHex("00000000"), -3485513579396041028},
		{mustHex("00017f7f"), 6573459401642635627},
		{mustHex("00ffffff"), 123573637386978882},
		{mustHex("ff010203"), -2839127690952877842},
		{mustHex("00000001"), -4069959284402364209},
		{[]byte("a"), -8839064797231613815},
		{[]byte("hello"), -3758069500696749310},
		{mustHex("c3a9"), 5461403030378599040},
	}
	for _, c := range cases {
		if got := Token(c.key); got != c.want {
			t.Errorf("Token(%x) = %d, want %d", c.key, got, c.want)
		}
	}
	if got := Token(nil); got != math.MinInt64 {
		t.Errorf("Token(empty) = %d, want MinToken", got)
	}
}

// TestTokenMatchesStandardWithoutHighTail checks the variant against the
// standard MurmurHash3 where they must agree: keys whose tail has no byte
// ≥ 0x80.
func TestTokenMatchesStandardWithoutHighTail(t *testing.T) {
	for n := 1; n < 70; n++ {
		key := make([]byte, n)
		for i := range key {
			key[i] = byte(i*37+n) & 0x7f
			if i < n-n%16 {
				key[i] |= 0x80 // body bytes may be high: the body is read unsigned
			}
		}
		h1, _ := murmur3.Sum128(key)
		if got := Token(key); got != int64(h1) {
			t.Errorf("len %d: Token = %d, standard h1 = %d", n, got, int64(h1))
		}
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}
