package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/internal/jstest"
)

// testTTL is short so that expiry tests take seconds; rounds are TTL/3.
const testTTL = 3 * time.Second

// startJetStream starts a real nats-server with JetStream and returns a
// connection to it.
func startJetStream(t *testing.T) *nats.Conn { return jstest.Server(t) }

// leaseBucket makes the lease bucket on nc's JetStream.
func leaseBucket(t *testing.T, nc *nats.Conn) jetstream.KeyValue {
	t.Helper()
	return leaseBucketTTL(t, nc, testTTL)
}

// leaseBucketTTL makes the lease bucket with entries expiring after ttl.
func leaseBucketTTL(t *testing.T, nc *nats.Conn, ttl time.Duration) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateOrUpdateKeyValue(context.Background(), LeaseBucketConfig(1, ttl))
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// node is one node's Leases with a record of its callbacks.
type node struct {
	*Leases
	mu       sync.Mutex
	acquired map[int]uint64 // epoch of each Acquire, by partition
	released []int
}

// startNode starts node id on kv; check, when set, runs inside Acquire.
func startNode(t *testing.T, kv jetstream.KeyValue, id string, partitions int, gate sync.Locker,
	check func(p int, epoch uint64) error) *node {
	t.Helper()
	return startNodeWith(t, kv, LeaseConfig{Node: id, Partitions: partitions, gate: gate}, check)
}

// startNodeWith is startNode with more of cfg set (TTL: testTTL).
func startNodeWith(t *testing.T, kv jetstream.KeyValue, cfg LeaseConfig, check func(p int, epoch uint64) error) *node {
	t.Helper()
	n := &node{acquired: map[int]uint64{}}
	n.Leases = startLeases(t, kv, LeaseConfig{Node: cfg.Node, Partitions: cfg.Partitions, TTL: testTTL, gate: cfg.gate,
		answering: cfg.answering,
		Acquire: func(p int, epoch uint64) error {
			if check != nil {
				if err := check(p, epoch); err != nil {
					return err
				}
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			n.acquired[p] = epoch
			return nil
		},
		Release: func(p int) {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.released = append(n.released, p)
		}})
	return n
}

// startLeases starts Leases on kv as cfg says, logging as its node, and
// stops them when the test ends.
func startLeases(t *testing.T, kv jetstream.KeyValue, cfg LeaseConfig) *Leases {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil)).With("node", cfg.Node)
	l, err := StartLeases(kv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.Stop(ctx)
	})
	return l
}

// releases returns the partitions released so far, in release order.
func (n *node) releases() []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.released)
}

// releasedSorted returns the partitions released so far, sorted.
func (n *node) releasedSorted() []int {
	return slices.Sorted(slices.Values(n.releases()))
}

// eventually polls cond until it holds, failing after a generous wait
// (this is not a timing assertion: the wait only bounds a hung test).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ownsNone fails when another node's Leases reports p held now: two
// owners at once is what leases exist to prevent.
func ownsNone(others ...*node) func(p int, epoch uint64) error {
	return func(p int, _ uint64) error {
		for _, o := range others {
			if _, ok := o.Owns(p); ok {
				return fmt.Errorf("partition %d taken while %s still owns it", p, o.cfg.Node)
			}
		}
		return nil
	}
}

func TestTwoNodesSplitThePartitionsAndNeverShareOne(t *testing.T) {
	kv := leaseBucket(t, startJetStream(t))
	const parts = 16
	a := startNode(t, kv, "a", parts, nil, nil)
	eventually(t, "a alone owns every partition", func() bool { return len(a.Owned()) == parts })
	var b *node
	bReady := make(chan struct{})
	b = startNode(t, kv, "b", parts, nil, func(p int, epoch uint64) error {
		<-bReady
		return ownsNone(a)(p, epoch)
	})
	close(bReady)
	eventually(t, "a and b own half each", func() bool {
		return len(a.Owned()) == parts/2 && len(b.Owned()) == parts/2
	})
	for p := range parts {
		_, byA := a.Owns(p)
		_, byB := b.Owns(p)
		if byA == byB {
			t.Errorf("partition %d: owned by a %v, by b %v; want exactly one", p, byA, byB)
		}
	}
	// What a handed over, it released first.
	if got, want := a.releasedSorted(), b.Owned(); !slices.Equal(got, want) {
		t.Errorf("a released %v, want b's partitions %v", got, want)
	}
}

func TestAStoppedNodeHandsItsPartitionsOverAtOnce(t *testing.T) {
	kv := leaseBucket(t, startJetStream(t))
	const parts = 8
	a := startNode(t, kv, "a", parts, nil, nil)
	b := startNode(t, kv, "b", parts, nil, ownsNone(a))
	eventually(t, "a and b split", func() bool { return len(a.Owned()) == parts/2 && len(b.Owned()) == parts/2 })
	held := b.Owned()
	t.Logf("b released %v before Stop", b.releases())
	before := len(b.releases())
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(b.releases()[before:])); !slices.Equal(got, held) {
		t.Errorf("b released %v on Stop, want %v", got, held)
	}
	// Stop returned with the leases deleted, not left to expire: free, or
	// already taken by a.
	for _, p := range held {
		e, err := kv.Get(context.Background(), partitionKey(p))
		if err == nil && strings.Contains(string(e.Value()), `"node":"b"`) {
			t.Errorf("partition %d after b stopped: still b's", p)
		} else if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("partition %d after b stopped: %v", p, err)
		}
	}
	if _, err := kv.Get(context.Background(), nodeKey("b")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("b's heartbeat after Stop: %v, want gone", err)
	}
	eventually(t, "a owns every partition", func() bool { return len(a.Owned()) == parts })
}

func TestACrashedNodesPartitionsAreTakenOnlyOnceItsLeasesLapse(t *testing.T) {
	kv := leaseBucket(t, startJetStream(t))
	const parts = 8
	var a *node
	b := startNode(t, kv, "b", parts, nil, nil)
	eventually(t, "b owns every partition", func() bool { return len(b.Owned()) == parts })
	a = startNode(t, kv, "a", parts, nil, ownsNone(b))
	eventually(t, "a and b split", func() bool { return len(a.Owned()) == parts/2 && len(b.Owned()) == parts/2 })
	held := b.Owned()
	releasedBefore := len(b.releases())
	b.halt() // renewals stop; nothing is handed over
	eventually(t, "a owns every partition", func() bool { return len(a.Owned()) == parts })
	if got := len(b.releases()); got != releasedBefore {
		t.Errorf("a crashed node released %d partitions", got-releasedBefore)
	}
	// The epochs a took b's partitions at are above any b held them at.
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range held {
		if a.acquired[p] == 0 {
			t.Errorf("partition %d: no Acquire on a", p)
		}
	}
}

// The bucket's own expiry is slow when its stream's leader has just
// changed; here it never comes, and the survivor expires the dead node's
// heartbeat and leases itself, once they have gone a TTL unrenewed.
func TestTheSurvivorsExpireACrashedNodesLeasesWhenTheBucketDoesNot(t *testing.T) {
	kv := leaseBucketTTL(t, startJetStream(t), time.Hour)
	const parts = 8
	b := startNode(t, kv, "b", parts, nil, nil)
	eventually(t, "b owns every partition", func() bool { return len(b.Owned()) == parts })
	a := startNode(t, kv, "a", parts, nil, ownsNone(b))
	eventually(t, "a and b split", func() bool { return len(a.Owned()) == parts/2 && len(b.Owned()) == parts/2 })
	b.halt()
	eventually(t, "a owns every partition", func() bool { return len(a.Owned()) == parts })
	if m := a.Members(); len(m) != 1 || m[0].Node != "a" {
		t.Errorf("members after b crashed: %v, want a alone", m)
	}
	if _, err := kv.Get(context.Background(), nodeKey("b")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("b's heartbeat: %v, want deleted", err)
	}
}

func TestAPausedOwnerStopsOwningBeforeAnotherNodeTakesOverAndLosesItsLeasesWhenItResumes(t *testing.T) {
	kv := leaseBucket(t, startJetStream(t))
	const parts = 4
	var gate sync.Mutex
	a := startNode(t, kv, "a", parts, &gate, nil)
	eventually(t, "a owns every partition", func() bool { return len(a.Owned()) == parts })
	gate.Lock() // a's next round waits: a is paused, as by SIGSTOP
	b := startNode(t, kv, "b", parts, nil, ownsNone(a))
	eventually(t, "b owns every partition", func() bool { return len(b.Owned()) == parts })
	if got := a.Owned(); len(got) != 0 {
		t.Errorf("paused a still owns %v", got)
	}
	gate.Unlock()
	// a's first round after the pause finds every lease taken.
	eventually(t, "a released every partition", func() bool { return len(a.releases()) >= parts })
	if got := slices.Sorted(slices.Values(a.releases()[:parts])); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("a released %v, want every partition once", got)
	}
	// Then the two split them again, never sharing one.
	eventually(t, "a and b split", func() bool { return len(a.Owned()) == parts/2 && len(b.Owned()) == parts/2 })
}

func TestAFailedAcquireHandsThePartitionBack(t *testing.T) {
	kv := leaseBucket(t, startJetStream(t))
	a := startNode(t, kv, "a", 2, nil, func(p int, _ uint64) error {
		if p == 0 {
			return errors.New("cannot restore")
		}
		return nil
	})
	eventually(t, "a owns partition 1", func() bool { _, ok := a.Owns(1); return ok })
	// b's share is one partition: it can only get 0 if a gave it back.
	b := startNode(t, kv, "b", 2, nil, ownsNone(a))
	eventually(t, "b owns partition 0", func() bool { _, ok := b.Owns(0); return ok })
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.acquired[0]; ok {
		t.Error("a recorded partition 0 although its Acquire failed")
	}
	if slices.Contains(a.released, 0) {
		t.Error("a released partition 0, which it never served")
	}
}

// A take that fails in Acquire is not tried again at once: its lease,
// given back, shows in the watch and starts a round, and while a
// partition's log had no leader, a node took and gave it back every 15 ms.
func TestAFailedTakeIsNotTriedAgainAtOnce(t *testing.T) {
	kv := leaseBucket(t, startJetStream(t))
	var tries atomic.Int32
	startNode(t, kv, "a", 1, nil, func(int, uint64) error {
		tries.Add(1)
		return errors.New("the partition's log has no leader")
	})
	eventually(t, "a tried to take the partition", func() bool { return tries.Load() > 0 })
	time.Sleep(2 * time.Second)
	// At most one try a quarter of a round (TTL/12), and one each round;
	// and more than one: the lease is given back, and taken again.
	if n, most := tries.Load(), int32(1+2*time.Second/(testTTL/12)+2*time.Second/(testTTL/3)+2); n > most || n < 2 {
		t.Errorf("%d tries in 2 s, want 2 to %d", n, most)
	}
}

// A take whose partition cannot be opened yet (its log's stream electing a
// leader) keeps its lease and opens the partition once it can: one epoch
// throughout, not a lease given back and taken again each try, and no
// Release for a partition never served.
func TestATakeThatCannotOpenYetKeepsItsLease(t *testing.T) {
	kv := leaseBucket(t, startJetStream(t))
	var (
		mu     sync.Mutex
		epochs []uint64
	)
	a := startNode(t, kv, "a", 1, nil, func(_ int, epoch uint64) error {
		mu.Lock()
		defer mu.Unlock()
		if epochs = append(epochs, epoch); len(epochs) <= 4 {
			return fmt.Errorf("%w: the partition's log has no leader", ErrTryAgain)
		}
		return nil
	})
	eventually(t, "a owns the partition", func() bool { _, ok := a.Owns(0); return ok })
	mu.Lock()
	defer mu.Unlock()
	if len(epochs) != 5 || slices.ContainsFunc(epochs, func(e uint64) bool { return e != epochs[0] }) {
		t.Errorf("Acquire called at epochs %v, want 5 calls at one epoch", epochs)
	}
	if epoch, _ := a.Owns(0); epoch != epochs[0] {
		t.Errorf("owned at epoch %d, want %d", epoch, epochs[0])
	}
	if r := a.releases(); len(r) != 0 {
		t.Errorf("released %v before it was ever served", r)
	}
}

// An Acquire that can never open the partition is tried while the lease
// is held, and not once the loop has ended, whether it handed its leases
// over (Stop) or not (halt, as a crash): none is left running either.
func TestAnOpenThatNeverSucceedsEndsWithTheLoop(t *testing.T) {
	for _, end := range []string{"stop", "halt"} {
		t.Run(end, func(t *testing.T) {
			kv := leaseBucket(t, startJetStream(t))
			var tries, inside atomic.Int32
			second := make(chan struct{}) // closed inside the second try
			a := startNode(t, kv, "a", 1, nil, func(int, uint64) error {
				inside.Add(1)
				defer inside.Add(-1)
				if tries.Add(1) == 2 {
					close(second)
				}
				time.Sleep(100 * time.Millisecond)
				return fmt.Errorf("%w: the partition's log has no leader", ErrTryAgain)
			})
			<-second // the loop ends while a try runs
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				if end == "halt" {
					a.halt()
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := a.Stop(ctx); err != nil {
					t.Error(err)
				}
			}()
			eventually(t, "the loop ended", func() bool {
				select {
				case <-ended:
					return true
				default:
					return false
				}
			})
			n := tries.Load()
			if inside.Load() != 0 {
				t.Error("an Acquire still runs after the loop ended")
			}
			time.Sleep(testTTL / 6)
			if m := tries.Load(); m != n {
				t.Errorf("%d more tries after the loop ended", m-n)
			}
		})
	}
}

// A lease handed over while its partition cannot be opened yet is not
// tried any more by the node that gave it up.
func TestAnOpenEndsWhenItsLeaseIsHandedOver(t *testing.T) {
	kv := leaseBucket(t, startJetStream(t))
	var tries [2]atomic.Int32
	a := startNode(t, kv, "a", 2, nil, func(p int, _ uint64) error {
		tries[p].Add(1)
		return fmt.Errorf("%w: the partition's log has no leader", ErrTryAgain)
	})
	eventually(t, "a tries both", func() bool { return tries[0].Load() > 0 && tries[1].Load() > 0 })
	// b's share is one: a hands one over.
	b := startNode(t, kv, "b", 2, nil, nil)
	eventually(t, "b owns one", func() bool { return len(b.Owned()) == 1 })
	given := b.Owned()[0]
	n := tries[given].Load()
	time.Sleep(testTTL / 6)
	if m := tries[given].Load(); m != n {
		t.Errorf("a tried partition %d %d more times after handing it over", given, m-n)
	}
	if _, ok := a.Owns(given); ok {
		t.Errorf("a owns partition %d, handed over", given)
	}
}

// A lease lost while its Acquire still runs is released only once that
// Acquire has returned: released first, the partition would be opened
// again after, by a node that no longer holds it.
func TestALeaseLostWhileItsAcquireRunsIsReleasedAfterIt(t *testing.T) {
	kv := leaseBucket(t, startJetStream(t))
	var (
		mu    sync.Mutex
		order []string
	)
	entered, unblock := make(chan struct{}), make(chan struct{})
	l := startLeases(t, kv, LeaseConfig{Node: "a", Partitions: 1, TTL: testTTL,
		Acquire: func(int, uint64) error {
			close(entered)
			<-unblock
			mu.Lock()
			defer mu.Unlock()
			order = append(order, "acquired")
			return nil
		},
		Release: func(int) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, "released")
		}})
	<-entered
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		stopped <- l.Stop(ctx) // hands the partition over
	}()
	time.Sleep(300 * time.Millisecond)
	close(unblock)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, []string{"acquired", "released"}) {
		t.Errorf("callbacks in the order %v, want Acquire's return before the Release", order)
	}
}

// An Acquire that fails after using up the lease operation's time (a
// partition log that did not answer) still lets the lease go: the next node
// takes the partition at once, not when a minute's lease expires.
func TestASlowFailedAcquireStillHandsThePartitionBack(t *testing.T) {
	const ttl = time.Minute
	kv := leaseBucketTTL(t, startJetStream(t), ttl)
	start := func(id string, acquire func(p int, epoch uint64) error) *Leases {
		return startLeases(t, kv, LeaseConfig{Node: id, Partitions: 2, TTL: ttl, Acquire: acquire})
	}
	tried := make(chan struct{}, 1)
	start("a", func(p int, _ uint64) error {
		if p != 0 {
			return nil
		}
		time.Sleep(2*time.Second + 200*time.Millisecond) // past opTimeout
		select {
		case tried <- struct{}{}:
		default:
		}
		return errors.New("the partition's log did not answer")
	})
	<-tried
	b := start("b", func(int, uint64) error { return nil })
	eventually(t, "b owns partition 0 long before a's lease of it would expire", func() bool {
		_, ok := b.Owns(0)
		return ok
	})
}

func TestStartLeasesRefusesWhatCannotWork(t *testing.T) {
	kv := leaseBucket(t, startJetStream(t))
	for _, tc := range []struct {
		name string
		cfg  LeaseConfig
	}{
		{"empty node id", LeaseConfig{Partitions: 4}},
		{"node id with a dot", LeaseConfig{Node: "a.b", Partitions: 4}},
		{"no partitions", LeaseConfig{Node: "a"}},
		{"too many partitions", LeaseConfig{Node: "a", Partitions: MaxPartitions + 1}},
		{"renewal slower than half the TTL", LeaseConfig{Node: "a", Partitions: 4, TTL: time.Second, Renew: 600 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := StartLeases(kv, tc.cfg); !errors.Is(err, ErrBadConfig) {
				t.Errorf("StartLeases: %v, want ErrBadConfig", err)
			}
		})
	}
}
