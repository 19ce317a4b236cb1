package engine

import (
	"time"

	"github.com/plaudit/plaudit/engine/objective"
)

// summaryCacheSize is how many version summaries an agent keeps between
// events: a page showing a few versions side by side reads each of them.
const summaryCacheSize = 4

type summaryKey struct {
	version   string
	objective int // the objective version, resolved
	limit     int
}

// A cachedSummary is a summary as computed at from. It holds until the
// agent applies another event, and from from until a run it counted
// matures (until; zero: no unmatured run of it has a horizon to reach).
type cachedSummary struct {
	key         summaryKey
	from, until time.Time
	sum         objective.Summary
}

// summaryCache holds the summaries computed since event seq. It is not
// state: a snapshot and a replay leave it empty, and it is never persisted.
type summaryCache struct {
	seq     uint64
	entries []cachedSummary // oldest first
}

// get returns the summary for key computed since event seq, if it is still
// the one a computation at now would give.
func (c *summaryCache) get(seq uint64, key summaryKey, now time.Time) (objective.Summary, bool) {
	if c.seq != seq {
		return objective.Summary{}, false
	}
	for i := range c.entries {
		e := &c.entries[i]
		if e.key == key && !now.Before(e.from) && (e.until.IsZero() || now.Before(e.until)) {
			return e.sum, true
		}
	}
	return objective.Summary{}, false
}

// put keeps e, computed after event seq, in place of any entry of its key,
// dropping the oldest when full and every entry from before seq.
func (c *summaryCache) put(seq uint64, e cachedSummary) {
	if c.seq != seq {
		clear(c.entries) // what they hold is garbage now
		c.seq, c.entries = seq, c.entries[:0]
	}
	for i := range c.entries {
		if c.entries[i].key == e.key {
			c.entries = append(c.entries[:i], c.entries[i+1:]...)
			break
		}
	}
	if len(c.entries) == summaryCacheSize {
		c.entries = append(c.entries[:0], c.entries[1:]...)
	}
	c.entries = append(c.entries, e)
}
