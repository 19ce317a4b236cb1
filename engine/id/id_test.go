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
