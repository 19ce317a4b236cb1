package actors

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine"
)

// sleepySteps is a read of total steps of a millisecond each.
type sleepySteps struct {
	total  int32
	steps  atomic.Int32
	closed atomic.Int32
}

func (s *sleepySteps) Step() bool {
	time.Sleep(time.Millisecond)
	return s.steps.Add(1) >= s.total
}

func (s *sleepySteps) Close() { s.closed.Add(1) }

func readSteps(r *Registry, agentID string, s *sleepySteps) error {
	_, err := ReadSteps(r, agentID, time.Time{}, func(*engine.Agent, time.Time) (*sleepySteps, error) { return s, nil })
	return err
}

// TestReadStepsLetsOtherRequestsThrough: a write sent while a read in steps
// is under way is answered between its steps, long before it ends.
func TestReadStepsLetsOtherRequestsThrough(t *testing.T) {
	r := newRegistry(t, openStore(t, nil), nil)
	info, run := createAgentWithRun(t, r)
	s := &sleepySteps{total: 500}
	done := make(chan error, 1)
	go func() { done <- readSteps(r, info.ID, s) }()
	waitFor(t, func() bool { return s.steps.Load() > 0 })
	for i := range 5 {
		if _, err := signal(r, info.ID, run.ID, i); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.steps.Load(); n >= s.total {
		t.Fatalf("the writes waited for all %d steps", n)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s.steps.Load() != s.total || s.closed.Load() != 1 {
		t.Fatalf("%d steps, closed %d times; want %d steps, closed once", s.steps.Load(), s.closed.Load(), s.total)
	}
}

// TestReadStepsEnds: a read in steps that outlives RequestTimeout, or
// whose actor fails under it, is answered with ErrUnavailable and closed.
func TestReadStepsEnds(t *testing.T) {
	for _, c := range []struct {
		name string
		tune func(*Config)
		fail bool
	}{
		{"past the request timeout", func(c *Config) { c.RequestTimeout = 100 * time.Millisecond }, false},
		{"actor fails", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &gatedStore{Store: openStore(t, nil)}
			r := newRegistry(t, g, c.tune)
			info, run := createAgentWithRun(t, r)
			s := &sleepySteps{total: 1 << 30}
			done := make(chan error, 1)
			go func() { done <- readSteps(r, info.ID, s) }()
			waitFor(t, func() bool { return s.steps.Load() > 0 })
			if c.fail {
				g.hold()
				go func() { _, _ = signal(r, info.ID, run.ID, 1) }()
				<-g.entered
				g.crash()
			}
			select {
			case err := <-done:
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("err = %v, want ErrUnavailable", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the read in steps was never answered")
			}
			waitFor(t, func() bool { return s.closed.Load() == 1 })
		})
	}
}
