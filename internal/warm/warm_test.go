package warm

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestBlockedWorkersHoldUpNoTask: with every worker blocked, more tasks
// still run (on new goroutines), and tasks run after Close too.
func TestBlockedWorkersHoldUpNoTask(t *testing.T) {
	p := New(1)
	workers := runtime.GOMAXPROCS(0)
	release := make(chan struct{})
	var blocked sync.WaitGroup
	for range workers * 40 { // past the bound: the rest run on plain goroutines
		blocked.Add(1)
		p.Go(func() { blocked.Done(); <-release })
	}
	blocked.Wait()
	if n := p.workers.Load(); n > p.max {
		t.Fatalf("%d workers, more than the bound of %d", n, p.max)
	}
	done := make(chan struct{})
	p.Go(func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a task waited for blocked workers")
	}
	close(release)
	p.Close()
	after := make(chan struct{})
	p.Go(func() { close(after) })
	select {
	case <-after:
	case <-time.After(10 * time.Second):
		t.Fatal("a task given after Close did not run")
	}
}
