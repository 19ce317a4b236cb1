package actors

import (
	"sync"
	"testing"
	"time"

	"github.com/plaudit/plaudit/persist"
)

// heldLoads is a real store whose loads wait at a gate, so a test can count
// the agents recovering at once.
type heldLoads struct {
	persist.Store
	entered chan struct{}
	gate    chan struct{}
}

func (h *heldLoads) Load(agent string) (persist.Recovered, error) {
	h.entered <- struct{}{}
	<-h.gate
	return h.Store.Load(agent)
}

// At most Config.Recoveries agents recover at once; the others wait for a
// token, and every agent recovers once the loads under way finish. Without
// a bound, every agent asked loads at once.
func TestRecoveriesAreBounded(t *testing.T) {
	const agents = 6
	for _, tc := range []struct {
		name       string
		bound      int
		concurrent int
	}{
		{"two at once", 2, 2},
		{"no bound", -1, agents},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := openStore(t, nil)
			first := New(Config{Store: store, Seed: 7, RequestTimeout: 10 * time.Second})
			ids := make([]string, agents)
			runs := make([]string, agents)
			for i := range ids {
				info, run := createAgentWithRun(t, first)
				ids[i], runs[i] = info.ID, run.ID
			}
			first.Close()

			held := &heldLoads{Store: store, entered: make(chan struct{}, agents), gate: make(chan struct{})}
			var open sync.Once
			release := func() { open.Do(func() { close(held.gate) }) }
			defer release() // a failed check must not leave loads waiting
			r := newRegistry(t, held, func(c *Config) { c.Recoveries = tc.bound })
			var wg sync.WaitGroup
			errs := make(chan error, agents)
			for i := range ids {
				wg.Go(func() {
					if _, err := runSignals(r, ids[i], runs[i]); err != nil {
						errs <- err
					}
				})
			}
			for range tc.concurrent {
				select {
				case <-held.entered:
				case <-time.After(10 * time.Second):
					t.Fatalf("fewer than %d agents started loading", tc.concurrent)
				}
			}
			if tc.concurrent < agents {
				select {
				case <-held.entered:
					t.Fatalf("a load began while %d were under way, with a bound of %d", tc.concurrent, tc.bound)
				case <-time.After(100 * time.Millisecond):
				}
			}
			release() // every load under way, and every later one, goes through
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		})
	}
}
