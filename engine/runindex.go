package engine

import (
	"github.com/oklog/ulid/v2"

	"github.com/plaudit/plaudit/engine/id"
)

// runIndex maps a run's id to its number in the run table, for the ids that
// do not carry that number (see put), such as an older log's. Those
// that are "run_" and a ULID are keyed by the ULID's 16 bytes: a map
// without pointers, which the collector never scans and which grows
// without reading a key's string again. (Keyed by the id string, the map
// held a pointer per run; its inserts, 4 % of a selection's server CPU at
// 64 in flight, are about as costly either way: a cache miss into a large
// table.) Any other id, which only an older log could hold, is keyed by
// its string.
type runIndex struct {
	ulids map[ulid.ULID]int32
	odd   map[string]int32 // made at the first such id
}

func newRunIndex() runIndex { return runIndex{ulids: map[ulid.ULID]int32{}} }

// getULID returns the number of the run whose id is "run_" and u, unless
// the id carries its number (see put).
func (x *runIndex) getULID(u ulid.ULID) (int32, bool) {
	i, ok := x.ulids[u]
	return i, ok
}

// getOdd returns the number of the run with an id of another form.
func (x *runIndex) getOdd(runID string) (int32, bool) {
	i, ok := x.odd[runID]
	return i, ok
}

// put numbers the run with that id i. An id made by id.NewNumbered with
// the run's own number, as every run the engine creates has, needs no
// entry: runTable.find reads the number from the id and checks the run it
// names. That keeps a selection's run out of a map that grows with every
// run (a cache miss to insert, and a sixth of a run's heap).
func (x *runIndex) put(runID string, i int32) {
	if u, ok := id.Parse(id.Run, runID); ok {
		if id.Number(u) == uint32(i) {
			return
		}
		x.ulids[u] = i
		return
	}
	if x.odd == nil {
		x.odd = map[string]int32{}
	}
	x.odd[runID] = i
}
