package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// unansweredKV is a lease bucket whose writes are never answered while
// stalled, as by a bucket without a leader: each waits out its context.
// It counts the writes waiting at once.
type unansweredKV struct {
	jetstream.KeyValue
	stalled    atomic.Bool // renewals and takes of partitions
	heartbeats atomic.Bool // heartbeats

	mu            sync.Mutex
	waiting, most int
}

func (kv *unansweredKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	if !kv.stalled.Load() || !strings.HasPrefix(key, "partition.") {
		return kv.KeyValue.Update(ctx, key, value, last)
	}
	return 0, kv.wait(ctx)
}

func (kv *unansweredKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if !kv.heartbeats.Load() || !strings.HasPrefix(key, "node.") {
		return kv.KeyValue.Put(ctx, key, value)
	}
	return 0, kv.wait(ctx)
}

func (kv *unansweredKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if !kv.stalled.Load() || !strings.HasPrefix(key, "partition.") {
		return kv.KeyValue.Create(ctx, key, value, opts...)
	}
	return 0, kv.wait(ctx)
}

// wait waits out ctx, counted among the writes waiting.
func (kv *unansweredKV) wait(ctx context.Context) error {
	kv.mu.Lock()
	kv.waiting++
	kv.most = max(kv.most, kv.waiting)
	kv.mu.Unlock()
	<-ctx.Done()
	kv.mu.Lock()
	kv.waiting--
	kv.mu.Unlock()
	return ctx.Err()
}

func (kv *unansweredKV) mostWaiting() int {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	return kv.most
}

// epochs returns the epoch of each partition n owns now.
func (n *node) epochs() map[int]uint64 {
	epochs := map[int]uint64{}
	for _, p := range n.Owned() {
		epochs[p], _ = n.Owns(p)
	}
	return epochs
}

// ownsStill fails unless n owns each partition of epochs at the epoch
// given, never taken afresh, and has released none since its release
// number released.
func (n *node) ownsStill(t *testing.T, epochs map[int]uint64, released int) {
	t.Helper()
	for p, want := range epochs {
		if got, ok := n.Owns(p); !ok || got != want {
			t.Errorf("partition %d: owned %v at epoch %d, want at %d (not taken afresh)", p, ok, got, want)
		}
	}
	if r := n.releases()[released:]; len(r) != 0 {
		t.Errorf("released %v", r)
	}
}

// TestARoundRenewsEveryLeaseAtOnce: renewals the bucket does not answer
// wait out their timeouts side by side, so each lease is tried again next
// round; one after the other, the last of 20 was tried 40 s into the
// bucket's election.
func TestARoundRenewsEveryLeaseAtOnce(t *testing.T) {
	kv := &unansweredKV{KeyValue: leaseBucket(t, startJetStream(t))}
	const parts = 8
	a := startNode(t, kv, "a", parts, nil, nil)
	eventually(t, "a owns every partition", func() bool { return len(a.Owned()) == parts })
	kv.stalled.Store(true)
	eventually(t, fmt.Sprintf("%d renewals waiting at once", parts), func() bool { return kv.mostWaiting() == parts })
	kv.stalled.Store(false)
	eventually(t, "a owns every partition again", func() bool { return len(a.Owned()) == parts })
}

// TestFreePartitionsAreTakenAtOnce: a node takes the free partitions it
// lacks side by side, up to takesPerRound a round; one after the other, a
// dead node's partitions were taken a round apart.
func TestFreePartitionsAreTakenAtOnce(t *testing.T) {
	kv := &unansweredKV{KeyValue: leaseBucket(t, startJetStream(t))}
	kv.stalled.Store(true)
	const parts = takesPerRound + 8
	a := startNode(t, kv, "a", parts, nil, nil)
	eventually(t, fmt.Sprintf("%d takes waiting at once", takesPerRound), func() bool { return kv.mostWaiting() == takesPerRound })
	kv.stalled.Store(false)
	eventually(t, "a owns every partition", func() bool { return len(a.Owned()) == parts })
	if most := kv.mostWaiting(); most != takesPerRound {
		t.Errorf("%d takes at once, want at most %d", most, takesPerRound)
	}
}

// countingGate is a round gate that counts the rounds past it and the
// ones waiting at it.
type countingGate struct {
	sync.Mutex
	waiting, passed atomic.Int32
}

func (g *countingGate) Lock() {
	g.waiting.Add(1)
	g.Mutex.Lock()
	g.waiting.Add(-1)
	g.passed.Add(1)
}

// TestAStopEndsTheLoopBeforeAnotherRound: a Stop that comes while a round
// is under way ends the loop once that round is done, even with the next
// round already due. Taken at random with it, as before, the stop of a
// cluster's last node, whose rounds wait out their timeouts, waited several
// rounds. Each trial stops a node that way; the old loop went on in half.
func TestAStopEndsTheLoopBeforeAnotherRound(t *testing.T) {
	kv := leaseBucket(t, startJetStream(t))
	const renew = 10 * time.Millisecond
	for trial := range 8 {
		gate := &countingGate{}
		gate.Mutex.Lock()
		l := startLeases(t, kv, LeaseConfig{Node: fmt.Sprintf("n%d", trial), Partitions: 4, TTL: testTTL, Renew: renew,
			gate: gate, Acquire: func(int, uint64) error { return nil }, Release: func(int) {}})
		eventually(t, "a round waiting at the gate", func() bool { return gate.waiting.Load() == 1 })
		stopped := make(chan error, 1)
		go func() { stopped <- l.Stop(context.Background()) }()
		eventually(t, "Stop called", l.stopping)
		time.Sleep(2 * renew) // the next round is due
		before := gate.passed.Load()
		gate.Mutex.Unlock()
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		if n := gate.passed.Load() - before; n != 1 {
			t.Fatalf("trial %d: %d rounds after Stop, want only the one under way", trial, n)
		}
	}
}

// TestALapsedLeaseIsKeptUntilTheBucketSaysOtherwise: renewals the bucket
// does not answer past the leases' validity stop the node owning them, but
// do not give them up: once renewals land again, it owns them at the same
// epochs, never released. (Given up, every survivor's lease went in a
// bucket's election longer than their validity.)
func TestALapsedLeaseIsKeptUntilTheBucketSaysOtherwise(t *testing.T) {
	kv := &unansweredKV{KeyValue: leaseBucketTTL(t, startJetStream(t), time.Hour)}
	const parts = 4
	a := startNode(t, kv, "a", parts, nil, nil)
	eventually(t, "a owns every partition", func() bool { return len(a.Owned()) == parts })
	epochs := a.epochs()
	kv.stalled.Store(true)
	eventually(t, "a's leases lapsed", func() bool { return len(a.Owned()) == 0 })
	kv.stalled.Store(false)
	eventually(t, "a owns every partition again", func() bool { return len(a.Owned()) == parts })
	a.ownsStill(t, epochs, 0)
}

// TestTheBucketKeepsALeaseUnrenewedForLongerThanItsTTL: while the bucket
// elects a leader no lease is renewed, and the one elected expires what
// is older than the bucket's TTL at once. At one lease TTL, every lease of
// the survivors went with the paused node's after an election of 4-9 s.
// The nodes expire the leases of the others themselves (reap).
func TestTheBucketKeepsALeaseUnrenewedForLongerThanItsTTL(t *testing.T) {
	kv := &unansweredKV{KeyValue: leaseBucket(t, startJetStream(t))}
	const parts = 4
	a := startNode(t, kv, "a", parts, nil, nil)
	eventually(t, "a owns every partition", func() bool { return len(a.Owned()) == parts })
	epochs := a.epochs()
	kv.stalled.Store(true)
	kv.heartbeats.Store(true)
	eventually(t, "a's leases lapsed", func() bool { return len(a.Owned()) == 0 })
	time.Sleep(testTTL) // unrenewed for nearly two TTLs
	kv.stalled.Store(false)
	kv.heartbeats.Store(false)
	eventually(t, "a owns every partition again", func() bool { return len(a.Owned()) == parts })
	a.ownsStill(t, epochs, 0)
}

// TestTheLeasesOfANodeWhoseServerAnswersAreNotDeleted: a node whose writes
// go unanswered for a TTL, as every node's do while the bucket elects a
// leader, keeps its leases when the bucket's leader still hears from its
// server: the other node does not delete them, and once its writes land
// it owns them as before. (Deleted, every lease of the survivor whose
// round came second went.)
func TestTheLeasesOfANodeWhoseServerAnswersAreNotDeleted(t *testing.T) {
	bucket := leaseBucketTTL(t, startJetStream(t), time.Hour)
	slow := &unansweredKV{KeyValue: bucket}
	const parts = 8
	up := func() map[string]bool { return map[string]bool{"a": true, "b": true} }
	b := startNodeWith(t, slow, LeaseConfig{Node: "b", Partitions: parts, answering: up}, nil)
	eventually(t, "b owns every partition", func() bool { return len(b.Owned()) == parts })
	a := startNodeWith(t, bucket, LeaseConfig{Node: "a", Partitions: parts, answering: up}, ownsNone(b))
	eventually(t, "a and b split", func() bool { return len(a.Owned()) == parts/2 && len(b.Owned()) == parts/2 })
	held := b.epochs()
	released := len(b.releases()) // the half handed over to a
	slow.stalled.Store(true)
	slow.heartbeats.Store(true)
	eventually(t, "b's leases lapsed", func() bool { return len(b.Owned()) == 0 })
	time.Sleep(2 * testTTL) // a has seen them unchanged for a TTL, and more
	slow.stalled.Store(false)
	slow.heartbeats.Store(false)
	eventually(t, "b owns its partitions again", func() bool { return len(b.Owned()) == parts/2 })
	b.ownsStill(t, held, released)
}

// TestALeaseTheBucketCannotVouchForOutlivesAnOutageOfEveryNode: with an
// external NATS, the bucket cannot say whether a node's server answers
// (none is named after a node). When no node's writes landed for longer
// than a TTL (an election of the bucket's leader), the node whose round
// comes first after it does not delete the other's leases, unchanged for
// that long, within a TTL of its own writes landing again.
func TestALeaseTheBucketCannotVouchForOutlivesAnOutageOfEveryNode(t *testing.T) {
	bucket := leaseBucketTTL(t, startJetStream(t), time.Hour)
	slowA, slowB := &unansweredKV{KeyValue: bucket}, &unansweredKV{KeyValue: bucket}
	const parts = 8
	unknown := func() map[string]bool { return map[string]bool{"nats-1": true} }
	b := startNodeWith(t, slowB, LeaseConfig{Node: "b", Partitions: parts, answering: unknown}, nil)
	eventually(t, "b owns every partition", func() bool { return len(b.Owned()) == parts })
	a := startNodeWith(t, slowA, LeaseConfig{Node: "a", Partitions: parts, answering: unknown}, ownsNone(b))
	eventually(t, "a and b split", func() bool { return len(a.Owned()) == parts/2 && len(b.Owned()) == parts/2 })
	heldA, heldB := a.epochs(), b.epochs()
	releasedB := len(b.releases())
	for _, kv := range []*unansweredKV{slowA, slowB} {
		kv.stalled.Store(true)
		kv.heartbeats.Store(true)
	}
	eventually(t, "every lease lapsed", func() bool { return len(a.Owned())+len(b.Owned()) == 0 })
	time.Sleep(2 * testTTL)
	for _, kv := range []*unansweredKV{slowA, slowB} {
		kv.stalled.Store(false)
		kv.heartbeats.Store(false)
	}
	eventually(t, "a and b own their partitions again", func() bool {
		return len(a.Owned()) == parts/2 && len(b.Owned()) == parts/2
	})
	a.ownsStill(t, heldA, 0)
	b.ownsStill(t, heldB, releasedB)
}

// landedKV is a lease bucket whose renewals can be made to land yet answer
// a timeout, and whose reads of leases can be made to fail.
type landedKV struct {
	jetstream.KeyValue
	landButTimeOut, failGets atomic.Bool
	landed, failed           atomic.Int32
}

func (kv *landedKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	rev, err := kv.KeyValue.Update(ctx, key, value, last)
	if err == nil && kv.landButTimeOut.Load() && strings.HasPrefix(key, "partition.") {
		kv.landed.Add(1)
		return 0, context.DeadlineExceeded
	}
	return rev, err
}

func (kv *landedKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if kv.failGets.Load() && strings.HasPrefix(key, "partition.") {
		kv.failed.Add(1)
		return nil, context.DeadlineExceeded
	}
	return kv.KeyValue.Get(ctx, key)
}

// TestALeaseWhoseLatestRevisionCannotBeReadIsKept: a renewal that timed
// out but landed makes the next one meet another revision, which the node
// reads to tell its own write from another's; a read that fails tells
// nothing, and the lease is kept until one answers.
func TestALeaseWhoseLatestRevisionCannotBeReadIsKept(t *testing.T) {
	kv := &landedKV{KeyValue: leaseBucketTTL(t, startJetStream(t), time.Hour)}
	const parts = 4
	a := startNode(t, kv, "a", parts, nil, nil)
	eventually(t, "a owns every partition", func() bool { return len(a.Owned()) == parts })
	epochs := a.epochs()
	kv.landButTimeOut.Store(true)
	eventually(t, "a round of renewals landed, answered as timed out", func() bool { return kv.landed.Load() >= parts })
	kv.failGets.Store(true)
	kv.landButTimeOut.Store(false)
	eventually(t, "the next round's reads failed", func() bool { return kv.failed.Load() >= parts })
	kv.failGets.Store(false)
	eventually(t, "a owns every partition still", func() bool { return len(a.Owned()) == parts })
	a.ownsStill(t, epochs, 0)
}
