package pebblelog

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plaudit/plaudit/persist"
)

// heldCommit makes s's first commit wait until release is closed, counts
// every commit, and runs then (if set) at the start of every later one.
func heldCommit(s *Store, then func()) (committing, release chan struct{}, commits *atomic.Int64) {
	committing, release, commits = make(chan struct{}), make(chan struct{}), new(atomic.Int64)
	s.beforeCommit = func() {
		n := commits.Add(1)
		if n == 1 {
			close(committing)
			<-release
		} else if then != nil {
			then()
		}
	}
	return committing, release, commits
}

// appendWhileHeld appends one event for an agent, then one event of size
// bytes for each of n more agents while the first append's commit is held,
// and releases it once all n wait for a group. It returns the first
// append's error, then the others'.
func appendWhileHeld(t *testing.T, s *Store, committing, release chan struct{}, n, size int) (error, []error) {
	t.Helper()
	first := make(chan error, 1)
	go func() { first <- s.Append(persist.Batch{Agent: "lead", First: 1, Events: [][]byte{[]byte("lead")}}) }()
	<-committing
	errs := make(chan error, n)
	for i := range n {
		go func() {
			ev := bytes.Repeat([]byte{byte(i)}, size)
			errs <- s.Append(persist.Batch{Agent: fmt.Sprintf("a%03d", i), First: 1, Events: [][]byte{ev}})
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.group.mu.Lock()
		queued := len(s.group.queue)
		s.group.mu.Unlock()
		if queued == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d appends queued behind a held commit", queued, n)
		}
	}
	close(release)
	timeout := time.After(10 * time.Second) // a lost turn leaves an append waiting for good
	recv := func(c chan error) error {
		select {
		case err := <-c:
			return err
		case <-timeout:
			t.Fatal("an append still waits for its group's commit")
			return nil
		}
	}
	leadErr := recv(first)
	var rest []error
	for range n {
		rest = append(rest, recv(errs))
	}
	return leadErr, rest
}

// Appends made while a commit is out go together in the next one, up to
// maxGroup appends and maxGroupBytes past the group's first; each is
// stored.
func TestAppendsWaitingForACommitShareTheNext(t *testing.T) {
	for _, tc := range []struct {
		name        string
		appends     int
		size        int
		wantCommits int64
	}{
		{"one group", 10, 100, 2},
		{"past the count bound", maxGroup + 10, 100, 3},
		// The next group's first is not counted: three of 3 MiB fit.
		{"past the bytes bound", 4, 3 << 20, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTemp(t)
			committing, release, commits := heldCommit(s, nil)
			leadErr, errs := appendWhileHeld(t, s, committing, release, tc.appends, tc.size)
			must(t, leadErr)
			for _, err := range errs {
				must(t, err)
			}
			if n := commits.Load(); n != tc.wantCommits {
				t.Errorf("%d commits for %d appends that waited; want %d", n, tc.appends+1, tc.wantCommits)
			}
			for i := range tc.appends {
				agent := fmt.Sprintf("a%03d", i)
				rec, err := s.Load(agent)
				must(t, err)
				if want := bytes.Repeat([]byte{byte(i)}, tc.size); rec.LastSeq != 1 || len(rec.Tail) != 1 || !bytes.Equal(rec.Tail[0], want) {
					t.Fatalf("agent %s: last seq %d, %d events; want its one event", agent, rec.LastSeq, len(rec.Tail))
				}
			}
		})
	}
}

// A group's failed commit fails every append in it, and stores none.
func TestAGroupSharesItsCommitsFailure(t *testing.T) {
	s := openTemp(t)
	committing, release, _ := heldCommit(s, func() {
		err := fmt.Errorf("%w: injected", persist.ErrFailed)
		s.failed.Store(&err)
	})
	leadErr, errs := appendWhileHeld(t, s, committing, release, 5, 100)
	must(t, leadErr)
	for i, err := range errs {
		if !errors.Is(err, persist.ErrFailed) {
			t.Errorf("append %d of a failed group: %v; want ErrFailed", i, err)
		}
	}
	for i := range errs {
		rec, err := s.Load(fmt.Sprintf("a%03d", i))
		must(t, err)
		if rec.LastSeq != 0 {
			t.Errorf("agent a%03d of a failed group has events up to %d", i, rec.LastSeq)
		}
	}
	if rec, err := s.Load("lead"); err != nil || rec.LastSeq != 1 {
		t.Errorf("the group before the failure: last seq %d, %v; want 1", rec.LastSeq, err)
	}
}
