package id

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

func TestNewIsPrefixedULIDOrderedByTime(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	a := New(Run, t0, rnd)
	b := New(Run, t0.Add(time.Millisecond), rnd)
	if !strings.HasPrefix(a, Run) || len(a) != len(Run)+26 {
		t.Fatalf("bad id %q", a)
	}
	u, err := ulid.Parse(strings.TrimPrefix(a, Run))
	if err != nil {
		t.Fatal(err)
	}
	if ulid.Time(u.Time()).UnixMilli() != t0.UnixMilli() {
		t.Fatalf("ulid time %v, want %v", ulid.Time(u.Time()), t0)
	}
	if !(a < b) {
		t.Fatalf("ids not ordered by time: %s !< %s", a, b)
	}
	if a == New(Run, t0, rnd) {
		t.Fatal("two ids at the same instant collided")
	}
}

func TestParseGivesBackWhatFormatWrites(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	s := New(Signal, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), rnd)
	u, ok := Parse(Signal, s)
	if !ok || Format(Signal, u) != s {
		t.Fatalf("Parse(%q) = %v, %v; Format gives %q", s, u, ok, Format(Signal, u))
	}
	for _, odd := range []string{
		"", "sig_", "sig_1", "run_" + s[len(Signal):], strings.ToLower(s), s + "0",
		"sig_" + "80000000000000000000000000", // overflows 128 bits
		"sig_" + "0000000000000000000000000I", // not Crockford
	} {
		if _, ok := Parse(Signal, odd); ok {
			t.Errorf("Parse(%q) accepted an id Format would not give back", odd)
		}
	}
}

// TestNewTakesItsEntropyFromTheSource: the 80 random bits are the low 16
// bits of the source's first draw and all 64 of its second, in big-endian
// order, so a seeded source gives reproducible ids.
func TestNewTakesItsEntropyFromTheSource(t *testing.T) {
	src, same := rand.New(rand.NewPCG(5, 6)), rand.New(rand.NewPCG(5, 6))
	u, err := ulid.Parse(strings.TrimPrefix(New(Run, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), src), Run))
	if err != nil {
		t.Fatal(err)
	}
	hi, lo := same.Uint64(), same.Uint64()
	want := []byte{byte(hi >> 8), byte(hi)}
	for i := range 8 {
		want = append(want, byte(lo>>(56-8*i)))
	}
	if got := u.Entropy(); string(got) != string(want) {
		t.Fatalf("entropy %x, want %x", got, want)
	}
}

// Parse accepts exactly the texts that Format gives back, over random
// texts of the right length in upper and lower case, with letters outside
// Crockford's alphabet and first characters that overflow 128 bits.
func TestParseAcceptsExactlyWhatFormatGivesBack(t *testing.T) {
	const chars = "0123456789ABCDEFGHJKMNPQRSTVWXYZabcdefghjkmnpqrstvwxyzILOUilou-"
	rnd := rand.New(rand.NewPCG(7, 8))
	accepted := 0
	for range 20000 {
		b := []byte(Run)
		for i := range ulid.EncodedSize {
			pool := chars[:32] // Crockford's alphabet, as Format writes it
			if i == 0 {
				pool = "0123456789ABC" // 8 and above overflow 128 bits
			}
			b = append(b, pool[rnd.IntN(len(pool))])
		}
		if rnd.IntN(2) == 0 { // one character from anywhere
			b[len(Run)+rnd.IntN(ulid.EncodedSize)] = chars[rnd.IntN(len(chars))]
		}
		s := string(b)
		u, ok := Parse(Run, s)
		strict, err := ulid.ParseStrict(s[len(Run):])
		want := err == nil && Format(Run, strict) == s
		if ok != want || ok && Format(Run, u) != s {
			t.Fatalf("Parse(%q) = %v, %v; Format gives back: %v", s, u, ok, want)
		}
		if ok {
			accepted++
		}
	}
	if accepted < 5000 || accepted > 15000 {
		t.Fatalf("%d of the 20,000 texts were ids: the test exercises too little of one side", accepted)
	}
}

// NewNumbered's id carries n, takes as much from rnd as New (so what a
// command draws after an id is the same either way), and keeps the time
// and 48 bits of New's randomness.
func TestNewNumberedCarriesItsNumber(t *testing.T) {
	at := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	for _, n := range []uint32{0, 1, 1 << 20, 1<<32 - 1} {
		a, b := rand.New(rand.NewPCG(7, uint64(n))), rand.New(rand.NewPCG(7, uint64(n)))
		plain, numbered := New(Run, at, a), NewNumbered(Run, at, b, n)
		u, ok := Parse(Run, numbered)
		if !ok {
			t.Fatalf("NewNumbered made %q, which Parse refuses", numbered)
		}
		if got := Number(u); got != n {
			t.Errorf("Number(%s) = %d, want %d", numbered, got, n)
		}
		p, _ := Parse(Run, plain)
		if p.Time() != u.Time() || string(p[10:]) != string(u[10:]) {
			t.Errorf("%s and %s: the time and the last 48 bits should be New's", plain, numbered)
		}
		if a.Uint64() != b.Uint64() {
			t.Errorf("NewNumbered took another amount of randomness than New")
		}
	}
}
