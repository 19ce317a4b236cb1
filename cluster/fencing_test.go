package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/jslog"
)

// fencedLogs opens and fences a partition's log on each Acquire, at the
// lease's epoch, as a node does before it serves the partition.
type fencedLogs struct {
	js   jetstream.JetStream
	mu   sync.Mutex
	logs map[int]*jslog.Log
}

func (f *fencedLogs) acquire(p int, epoch uint64) error {
	l, err := jslog.Open(context.Background(), f.js, p, jslog.Config{})
	if err != nil {
		return err
	}
	if err := l.Fence(context.Background(), epoch); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs[p] = l
	return nil
}

func (f *fencedLogs) log(p int) *jslog.Log {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logs[p]
}

// The SIGSTOP case, short of the process: an owner paused past its lease
// and resumed must not add a write to the log once another node took the
// partition, and the new owner must read every write acknowledged before.
func TestAnOwnerPausedPastItsLeaseCannotAppendAfterTheNewOwnerFenced(t *testing.T) {
	nc := startJetStream(t)
	kv := leaseBucket(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const parts = 2
	aLogs := &fencedLogs{js: js, logs: map[int]*jslog.Log{}}
	var gate sync.Mutex
	a := startNode(t, kv, "a", parts, &gate, aLogs.acquire)
	eventually(t, "a owns every partition", func() bool { return len(a.Owned()) == parts })
	ctx := context.Background()
	acked := persist.Batch{Agent: "agt_1", First: 1, Events: [][]byte{[]byte("acked before the pause")}}
	if _, err := aLogs.log(0).Append(ctx, acked); err != nil {
		t.Fatal(err)
	}

	gate.Lock() // a stops renewing, as a paused process would
	bLogs := &fencedLogs{js: js, logs: map[int]*jslog.Log{}}
	b := startNode(t, kv, "b", parts, nil, func(p int, epoch uint64) error {
		if err := ownsNone(a)(p, epoch); err != nil {
			return err
		}
		return bLogs.acquire(p, epoch)
	})
	eventually(t, "b owns every partition", func() bool { return len(b.Owned()) == parts })

	// a resumes mid-request: it had checked Owns before the pause.
	late := persist.Batch{Agent: "agt_1", First: 2, Events: [][]byte{[]byte("after the lease was lost")}}
	if _, err := aLogs.log(0).Append(ctx, late); !errors.Is(err, jslog.ErrFenced) {
		t.Fatalf("the deposed owner's append: %v, want ErrFenced", err)
	}
	gate.Unlock()
	got, err := bLogs.log(0).Tail(ctx, "agt_1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got[0].Events[0]) != "acked before the pause" {
		t.Fatalf("the new owner reads %+v, want exactly the write acknowledged before the pause", got)
	}
}
