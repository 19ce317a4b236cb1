package engine

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine/id"
)

// Every run is found by its id: by the number the id carries when it is
// the run's own (no index entry then), else by its ULID or, when it is not
// "run_" and a ULID as id.New writes it, by its string. An id never added
// finds nothing: one differing only in case, one carrying the number of a
// run with another id, one carrying a number past the table.
func TestRunTableFindsEveryRunByItsID(t *testing.T) {
	now := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	rnd := rand.New(rand.NewPCG(1, 2))
	ids := []string{
		id.NewNumbered(id.Run, now, rnd, 0), // carries its number
		id.NewNumbered(id.Run, now, rnd, 5), // carries another's: keyed by its ULID
		"run_01KB6ZQ2XJ0000000000000001",    // random bits: keyed by its ULID
		id.NewNumbered(id.Run, now, rnd, 3), // carries its number
		"run_01kb6zq2xj0000000000000002",    // lower case: not as id.New writes it
		"run_2",
		"01KB6ZQ2XJ0000000000000003", // no prefix
		"",
		id.NewNumbered(id.Run, now, rnd, 8), // carries its number
	}
	var tbl runTable
	for _, runID := range ids {
		tbl.add(Run{ID: runID, AgentID: "agt_1", CreatedAt: now})
	}
	if len(tbl.index.ulids) != 2 || len(tbl.index.odd) != 4 {
		t.Errorf("%d ids keyed by ULID and %d by string, want 2 and 4 (the rest carry their numbers)",
			len(tbl.index.ulids), len(tbl.index.odd))
	}
	for i, runID := range ids {
		if got, ok := tbl.find(runID); !ok || got != i {
			t.Errorf("find(%q) = %d, %v; want %d", runID, got, ok, i)
		}
	}
	for _, runID := range []string{
		"run_01KB6ZQ2XJ0000000000000002", "run_01kb6zq2xj0000000000000001", "run_3", "run_",
		id.NewNumbered(id.Run, now, rnd, 0), // run 0 has another id
		id.NewNumbered(id.Run, now, rnd, 9), // past the table
		id.NewNumbered(id.Run, now, rnd, 1<<31),
	} {
		if got, ok := tbl.find(runID); ok {
			t.Errorf("find(%q) = %d, never added", runID, got)
		}
	}
}
