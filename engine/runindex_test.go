package engine

import "testing"

// Every id finds the number it was given, whether keyed by its ULID or,
// when it is not "run_" and a ULID as id.New writes it, by its string; an
// id never put finds nothing, even one differing only in case.
func TestRunIndexFindsWhatWasPut(t *testing.T) {
	x := newRunIndex()
	ids := []string{
		"run_01KB6ZQ2XJ0000000000000000", // keyed by its ULID
		"run_01KB6ZQ2XJ0000000000000001",
		"run_01kb6zq2xj0000000000000002", // lower case: not as id.New writes it
		"run_2",
		"01KB6ZQ2XJ0000000000000003", // no prefix
		"",
	}
	for i, runID := range ids {
		x.put(runID, int32(i))
	}
	if len(x.ulids) != 2 || len(x.odd) != 4 {
		t.Errorf("%d ids keyed by ULID and %d by string, want 2 and 4", len(x.ulids), len(x.odd))
	}
	for i, runID := range ids {
		if got, ok := x.get(runID); !ok || got != int32(i) {
			t.Errorf("get(%q) = %d, %v; want %d", runID, got, ok, i)
		}
	}
	for _, runID := range []string{"run_01KB6ZQ2XJ0000000000000002", "run_01kb6zq2xj0000000000000000", "run_3", "run_"} {
		if got, ok := x.get(runID); ok {
			t.Errorf("get(%q) = %d, never put", runID, got)
		}
	}
}
