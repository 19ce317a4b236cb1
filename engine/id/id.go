// Package id makes Plaudit's identifiers: a type prefix and a ULID, e.g.
// "run_01J9Z3K8Q4W6X0N1M2P3R4S5T6". Time and randomness come from the caller
// so the engine stays deterministic under test.
package id

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// Prefixes of the identifiers the engine makes.
const (
	Agent     = "agt_"
	Variation = "var_"
	Run       = "run_"
	Signal    = "sig_"
	Feedback  = "fb_"
	Report    = "rpt_"
	Reward    = "rw_"
	Workspace = "ws_"
	APIKey    = "key_"
	Profile   = "profile_"
	Account   = "account_"
)

// New returns prefix + a ULID for time t with 80 bits drawn from rnd.
func New(prefix string, t time.Time, rnd *rand.Rand) string {
	u := newULID(t, rnd)
	return prefix + u.String()
}

func newULID(t time.Time, rnd *rand.Rand) ulid.ULID {
	var u ulid.ULID
	_ = u.SetTime(ulid.Timestamp(t))
	hi, lo := rnd.Uint64(), rnd.Uint64()
	for i := 0; i < 2; i++ {
		u[6+i] = byte(hi >> (8 * (1 - i)))
	}
	for i := 0; i < 8; i++ {
		u[8+i] = byte(lo >> (8 * (7 - i)))
	}
	return u
}

// NewNumbered is New carrying n in the first 32 of the ULID's 80 random
// bits, where Number reads it back: n masked by the next 32, so that the id
// looks as random as New's. The last 48 bits are drawn from rnd, which
// gives as much as New takes from it. A run's id carries the run's number
// in its agent's run table, which then finds the run without a map
// (engine).
func NewNumbered(prefix string, t time.Time, rnd *rand.Rand, n uint32) string {
	u := newULID(t, rnd)
	binary.BigEndian.PutUint32(u[6:10], n^binary.BigEndian.Uint32(u[10:14]))
	return prefix + u.String()
}

// Number returns the number NewNumbered put in u (for any other ULID, a
// number its random bits make).
func Number(u ulid.ULID) uint32 {
	return binary.BigEndian.Uint32(u[6:10]) ^ binary.BigEndian.Uint32(u[10:14])
}

// Parse returns the ULID of s when s is prefix followed by a ULID in the
// form New writes it (upper case), so that Format gives s back; ok is false
// for any other string.
func Parse(prefix, s string) (u ulid.ULID, ok bool) {
	if len(s) != len(prefix)+ulid.EncodedSize || s[:len(prefix)] != prefix {
		return ulid.ULID{}, false
	}
	text := s[len(prefix):]
	u, err := ulid.ParseStrict(text)
	if err != nil {
		return ulid.ULID{}, false
	}
	// ParseStrict takes only Crockford's alphabet, in either case, and no
	// value over 128 bits: each upper-case text is then the only one of its
	// ULID, the one Format writes.
	for i := range len(text) {
		if 'a' <= text[i] && text[i] <= 'z' {
			return ulid.ULID{}, false
		}
	}
	return u, true
}

// Format is the id of ULID u with prefix, as New writes it.
func Format(prefix string, u ulid.ULID) string {
	var b strings.Builder
	b.Grow(len(prefix) + ulid.EncodedSize)
	b.WriteString(prefix)
	var text [ulid.EncodedSize]byte
	_ = u.MarshalTextTo(text[:])
	b.Write(text[:])
	return b.String()
}
