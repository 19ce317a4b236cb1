package engine

import (
	"github.com/oklog/ulid/v2"

	"github.com/plaudit/plaudit/engine/id"
)

// runIndex maps a run's id to its number in the run table. The ids the
// engine makes ("run_" and a ULID) are keyed by the ULID's 16 bytes: a map
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

// get returns the number of the run with that id.
func (x *runIndex) get(runID string) (int32, bool) {
	if u, ok := id.Parse(id.Run, runID); ok {
		i, ok := x.ulids[u]
		return i, ok
	}
	i, ok := x.odd[runID]
	return i, ok
}

// put numbers the run with that id i.
func (x *runIndex) put(runID string, i int32) {
	if u, ok := id.Parse(id.Run, runID); ok {
		x.ulids[u] = i
		return
	}
	if x.odd == nil {
		x.odd = map[string]int32{}
	}
	x.odd[runID] = i
}
