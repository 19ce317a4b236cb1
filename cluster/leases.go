package cluster

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/internal/jserr"
	"github.com/plaudit/plaudit/internal/token"
)

// LeaseBucket is the JetStream key-value bucket that holds partition leases
// ("partition.<p>", the owner's node id) and node heartbeats ("node.<id>").
// Nodes delete, by revision, the entries they have seen unrenewed for a
// lease TTL (reap); the bucket expires them after bucketTTLs TTLs, as a
// backstop, and its expiry marker wakes every node's watcher.
const LeaseBucket = "plaudit_leases"

// LeaseStream is the JetStream stream beneath LeaseBucket.
const LeaseStream = "KV_" + LeaseBucket

// Lease timing defaults: a dead owner's partitions are taken within
// DefaultLeaseTTL plus one renewal round, or, when the dead node led the
// lease bucket's stream, once JetStream has elected another leader (4-9 s
// in nats-server) if that is later.
const (
	DefaultLeaseTTL = 6 * time.Second
	// movesPerRound bounds how many partitions a node hands over in one
	// round while the cluster rebalances, so a node joining does not make
	// every partition unavailable at once.
	movesPerRound = 8
	// takesPerRound bounds how many free partitions a node takes in one
	// round, all at once: a dead node's share of 64 partitions over three
	// nodes is taken by the two others in one round (at 8, one after the
	// other, the last waited a round more, 2 s by default).
	takesPerRound = 16
)

// LeaseConfig configures a node's Leases.
type LeaseConfig struct {
	Node       string // this node's id (ValidNode)
	Partitions int    // the cluster's partition count
	// TTL is the lease TTL (DefaultLeaseTTL), the one LeaseBucketConfig
	// made the bucket with; Renew is how often the owner renews (TTL/3).
	TTL, Renew time.Duration
	// Acquire is called when this node has taken partition p, before Owns
	// reports it; epoch is the lease's revision, higher than any earlier
	// owner's, for fencing the partition's log. It runs beside the lease
	// loop. An error wrapping ErrTryAgain keeps the lease (renewed as any
	// other) and Acquire is called again a quarter of a round later, for
	// as long as the lease is held; any other error hands the partition
	// back.
	Acquire func(p int, epoch uint64) error
	// Release is called once Owns reports false for p: before the lease is
	// handed over, or once it is known lost (expired, taken, or not renewed
	// in time). It is not called for a lease whose Acquire never succeeded,
	// and not before an Acquire under way has returned.
	Release func(p int)
	Logger  *slog.Logger

	// gate, when set, is locked and unlocked at the top of every round:
	// a test holding it pauses the node as SIGSTOP would.
	gate sync.Locker
	// rewatch is how many rounds apart the view is read afresh in any
	// case (rewatchEvery when zero; tests).
	rewatch int
	// answering, when set, stands in for the bucket's word on its
	// servers (Leases.servers; tests).
	answering func() map[string]bool
}

// Leases holds this node's partition leases: it renews them, takes free
// partitions up to its fair share of the live nodes, and hands partitions
// over when another node has fewer than its share.
//
// Ownership is safe by time as well as by revision: a lease counts as held
// only until TTL (less a tenth, for clock-rate drift) after the renewal
// that last succeeded was sent, which is before the bucket can expire it.
// An owner that stops running (paused, partitioned from the cluster) thus
// stops reporting Owns before anyone else can take the partition. The log
// is fenced too (appends carry the epoch), for an owner paused between its
// Owns check and its append.
type Leases struct {
	cfg  LeaseConfig
	kv   jetstream.KeyValue
	pref []int // partitions in this node's rendezvous order
	// run tells this Leases' writes from any other's, an earlier process
	// of the same node included: a write that timed out but landed is
	// recognised as its own.
	runID string

	owned []atomic.Pointer[lease] // by partition; nil when not owned
	// releasing marks partitions whose Release is running, in a goroutine
	// of its own (it waits for the partition's writes, and the leases of
	// the others must go on being renewed meanwhile); such a partition is
	// not taken again until it is done. releases counts them.
	releasing []atomic.Bool
	releases  sync.WaitGroup
	// opens counts the goroutines calling Acquire (see opening).
	opens sync.WaitGroup
	// takeFailed is when this node's last take of each partition failed
	// for good in Acquire (Unix nanoseconds; 0: never). The lease given
	// back shows in the watch and starts a round at once, and it would be
	// taken again at once.
	takeFailed []atomic.Int64

	stop     chan struct{} // closed by Stop or halt
	done     chan struct{} // closed when run returns
	stopOnce sync.Once
	handover atomic.Bool // Stop (hand every partition over), not halt

	// view is the bucket as last watched, by key; only run touches it.
	view map[string]leaseValue
	// unseen is this node's oldest heartbeat write the watch has not
	// shown yet, and when it was written (zero: none); only run touches
	// it. A watch that does not show it within half a round has stalled.
	unseen   uint64
	unseenAt time.Time
	// nudged asks run to read the view afresh (Nudge); reloaded is when
	// it last tried, reloadFailed whether that failed, and reading the
	// read in flight, nil when none is (only run touches them).
	nudged chan struct{}
	// takesFailed tells run that an Acquire failed for good: its lease is
	// given back (giveBackFailed) between rounds.
	takesFailed  chan struct{}
	reloaded     time.Time
	reloadFailed bool
	reading      chan viewRead
	// answered is whether the last round's heartbeat was written, and
	// answeredSince when the first of those in a row was (only run
	// touches them).
	answered      bool
	answeredSince time.Time
	// owners is each partition's owner in view, for Owner; members the
	// live nodes in view, for Members.
	owners  atomic.Pointer[[]string]
	members atomic.Pointer[[]Member]
}

// lease is a held partition: its epoch (the revision that acquired it), its
// latest revision, and until when it counts as held; lapsed once a renewal
// has failed past that time (see renew). It is served only once open says
// its Acquire succeeded.
type lease struct {
	epoch, rev uint64
	until      time.Time
	lapsed     bool
	open       *opening
}

// opening is a taken lease's Acquire, tried until it succeeds, fails for
// good, or the lease goes. The lease is renewed meanwhile: a partition
// whose log stream is electing a leader (its last owner led it, and died)
// is opened as soon as the stream has one, instead of being given back
// after each failed try and taken again a round later.
type opening struct {
	done   chan struct{} // closed once Acquire is no longer called
	ok     atomic.Bool   // Acquire succeeded
	failed atomic.Bool   // Acquire failed for good: the lease is to be given back
}

// ErrTryAgain, wrapped in Acquire's error, says the partition cannot be
// opened yet but may be soon (its log's stream has no leader): the lease is
// kept, and Acquire called again.
var ErrTryAgain = errors.New("cluster: not yet")

// leaseValue is a lease or heartbeat entry as stored, with its revision
// and when this node first saw that revision.
type leaseValue struct {
	Node  string    `json:"node"`
	Run   string    `json:"run"`
	Since time.Time `json:"since"`
	rev   uint64
	seen  time.Time
}

// ErrBadConfig is returned for a LeaseConfig or cluster setting that cannot work.
var ErrBadConfig = errors.New("cluster: bad configuration")

// ValidNode reports whether id can name a node: 1 to 64 letters, digits,
// '-' or '_' (it becomes part of a key and a subject).
func ValidNode(id string) bool { return len(id) <= 64 && token.Valid(id) }

// LeaseBucketConfig is the lease bucket's configuration for a cluster of
// replicas copies and lease TTL ttl. The bucket keeps an entry for
// bucketTTLs lease TTLs after its last write: the nodes expire leases
// themselves, a TTL after they last saw them change (Leases.reap), and
// the bucket's expiry is the backstop. At one TTL, a bucket leader
// elected after the old one's node paused expired every lease at once,
// the survivors' too: none could be renewed during the election.
func LeaseBucketConfig(replicas int, ttl time.Duration) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:   LeaseBucket,
		History:  1,
		TTL:      bucketTTLs * ttl,
		Storage:  jetstream.FileStorage,
		Replicas: replicas,
		// Expiry leaves a marker for this long, so watchers hear of it.
		LimitMarkerTTL: max(ttl, time.Second),
	}
}

// bucketTTLs is the lease bucket's TTL in lease TTLs: elections of the
// bucket's leader take 4-9 s here, and an entry is at most a round old
// when one begins.
const bucketTTLs = 3

// StartLeases starts holding leases for cfg.Node in kv, the lease bucket.
func StartLeases(kv jetstream.KeyValue, cfg LeaseConfig) (*Leases, error) {
	if !ValidNode(cfg.Node) {
		return nil, fmt.Errorf("%w: node id %q (1-64 letters, digits, '-', '_')", ErrBadConfig, cfg.Node)
	}
	if cfg.Partitions < 1 || cfg.Partitions > MaxPartitions {
		return nil, fmt.Errorf("%w: %d partitions (1-%d)", ErrBadConfig, cfg.Partitions, MaxPartitions)
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultLeaseTTL
	}
	if cfg.Renew <= 0 {
		cfg.Renew = cfg.TTL / 3
	}
	if cfg.Renew*2 > cfg.TTL {
		return nil, fmt.Errorf("%w: renewing every %v leaves no room in a %v lease", ErrBadConfig, cfg.Renew, cfg.TTL)
	}
	if cfg.Acquire == nil {
		cfg.Acquire = func(int, uint64) error { return nil }
	}
	if cfg.Release == nil {
		cfg.Release = func(int) {}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.rewatch <= 0 {
		cfg.rewatch = rewatchEvery
	}
	l := &Leases{cfg: cfg, kv: kv, pref: preference(cfg.Node, cfg.Partitions), runID: rand.Text(),
		owned:      make([]atomic.Pointer[lease], cfg.Partitions),
		releasing:  make([]atomic.Bool, cfg.Partitions),
		takeFailed: make([]atomic.Int64, cfg.Partitions),
		stop:       make(chan struct{}), done: make(chan struct{}), nudged: make(chan struct{}, 1),
		takesFailed: make(chan struct{}, 1)}
	// The bucket as it is now, before the first round: a node that starts
	// must see the leases already held, or it would count itself alone.
	w, view, err := l.watch(nil)
	if err != nil {
		return nil, fmt.Errorf("cluster: watching leases: %w", err)
	}
	l.view = view
	l.publishOwners()
	go l.run(w)
	return l, nil
}

// Owns reports whether this node holds partition p now, and its epoch.
func (l *Leases) Owns(p int) (epoch uint64, ok bool) {
	if p < 0 || p >= len(l.owned) {
		return 0, false
	}
	ls := l.owned[p].Load()
	if ls == nil || !ls.open.ok.Load() || !time.Now().Before(ls.until) {
		return 0, false
	}
	return ls.epoch, true
}

// Owned lists the partitions this node holds now, in order.
func (l *Leases) Owned() []int {
	var ps []int
	for p := range l.owned {
		if _, ok := l.Owns(p); ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// Owner is the node holding partition p as last watched ("" if none). It
// may be stale by a watch's delay: routing retries on the owner's refusal.
func (l *Leases) Owner(p int) string {
	// view belongs to run; owners are published for other goroutines here.
	if o := l.owners.Load(); o != nil && p >= 0 && p < len(*o) {
		return (*o)[p]
	}
	return ""
}

// Nudge tells the node that its view may be stale: a request found no
// owner for a partition, or its owner refused it. The view is read afresh
// soon, at most once every nudgeGap.
func (l *Leases) Nudge() {
	select {
	case l.nudged <- struct{}{}:
	default:
	}
}

// nudgeGap is the least time between two reads of the view that Nudge
// asks for: requests waiting on a handover nudge every 20 ms.
const nudgeGap = 250 * time.Millisecond

// Stop hands every partition over (Release, then the lease deleted so
// another node takes it at once), removes this node's heartbeat and
// returns once done or ctx ends.
func (l *Leases) Stop(ctx context.Context) error {
	l.handover.Store(true)
	l.stopOnce.Do(func() { close(l.stop) })
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopping reports whether Stop or halt has been called.
func (l *Leases) stopping() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// halt stops renewing without handing anything over, as a crash would
// (tests).
func (l *Leases) halt() {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
}

func partitionKey(p int) string { return "partition." + strconv.Itoa(p) }

func nodeKey(node string) string { return "node." + node }

// run is the node's lease loop: a round every Renew, and one as soon as
// the watch shows a partition freed or a node come or gone.
func (l *Leases) run(w jetstream.KeyWatcher) {
	defer close(l.done)
	defer func() {
		stopWatch(w)
		if r := l.reading; r != nil { // the watch it may start is nobody's
			go func() {
				if v := <-r; v.err == nil {
					stopWatch(v.w)
				}
			}()
		}
	}()
	tick := time.NewTicker(l.cfg.Renew)
	defer tick.Stop()
	since := time.Now().UTC()
	l.round(since)
	reapDue := time.NewTimer(l.untilReap())
	defer reapDue.Stop()
	for rounds := 1; ; {
		reapDue.Reset(l.untilReap())
		// A stop goes first. Without the bucket's quorum a round waits
		// out its timeout, and a tick is then always due: taken at random
		// among the ready cases, the stop of a cluster's last node waited
		// out several rounds (18 s).
		if l.stopping() {
			l.finish()
			return
		}
		select {
		case <-l.stop:
			l.finish()
			return
		case e, ok := <-w.Updates():
			if !ok {
				// The watch ended (a lost connection): watch again, and
				// keep renewing on the ticker meanwhile, or until the
				// next read if the bucket does not answer now.
				w = idleWatcher{}
				l.read()
				continue
			}
			if e != nil && l.observe(e) {
				l.round(since)
			}
		case r := <-l.reading:
			l.reading = nil
			if l.took(r) {
				stopWatch(w)
				w = r.w
				// What the watch it replaces did not show may be free.
				l.reap()
				l.balance()
			}
		case <-l.takesFailed:
			l.giveBackFailed()
		case <-l.nudged:
			if l.reloadDue(nudgeGap) {
				l.read()
			}
		case <-reapDue.C:
			// An entry is due to go between rounds: its deletion, once
			// the watch shows it, starts the round that takes its
			// partition. Not while the bucket does not answer: the reap
			// would hold the next round up by its timeouts.
			if l.answered {
				l.reap()
			}
		case <-tick.C:
			// The renewals first, whatever the watch.
			l.round(since)
			if l.stopping() {
				continue
			}
			// A watch can stall without ending (JetStream moving the
			// bucket's leader): it is started again when it has not shown
			// this node's own heartbeat in time (but not again within a
			// round of a read that failed), and now and then anyway; and
			// every round while there is no watch at all.
			_, none := w.(idleWatcher)
			rounds++
			switch {
			case l.stalled() && l.reloadDue(0):
				if l.reading == nil {
					l.cfg.Logger.Info("the lease watch stalled: watching again", "component", "cluster")
				}
				l.read()
			case none || rounds%l.cfg.rewatch == 0:
				l.read()
			}
		}
	}
}

// rewatchEvery is how many rounds apart the view is read afresh.
const rewatchEvery = 10

// wrote notes a heartbeat write at revision rev, for stalled.
func (l *Leases) wrote(rev uint64) {
	if l.unseen == 0 {
		l.unseen, l.unseenAt = rev, time.Now()
	}
}

// saw notes that the watch showed revision rev.
func (l *Leases) saw(rev uint64) {
	if l.unseen != 0 && rev >= l.unseen {
		l.unseen = 0
	}
}

// stalled reports whether the watch has not shown a heartbeat written
// half a round ago: it would not show the others' leases either, and the
// view (and so routing) would lag until the next reload.
func (l *Leases) stalled() bool {
	return l.unseen != 0 && time.Since(l.unseenAt) >= l.cfg.Renew/2
}

// reloadDue reports whether a read of the view asked for now may run: gap
// after the last one, or a round after one that failed (reads that time
// out one after another would hold the renewals up).
func (l *Leases) reloadDue(gap time.Duration) bool {
	if l.reloadFailed {
		gap = max(gap, l.cfg.Renew)
	}
	return time.Since(l.reloaded) >= gap
}

// quickTimeout bounds the bucket's status, which reap reads in the loop:
// a healthy bucket answers in milliseconds, and one that does not must not
// hold the lease loop up for long.
func (l *Leases) quickTimeout() time.Duration { return l.opTimeout() / 4 }

// viewRead is a read of the view: a new watch, and the entries the
// bucket held when it started.
type viewRead struct {
	w    jetstream.KeyWatcher
	view map[string]leaseValue
	err  error
}

// read starts a read of the view, unless one is in flight: a new watch
// and what it shows first, read on a goroutine of its own for up to
// opTimeout, and taken by the loop (took) when it comes. The loop goes on
// meanwhile (its renewals, and the watch it has). Waited for in the loop,
// a read was given a quarter of that, so as not to hold the renewals up,
// and one whose watch started later was thrown away: a survivor of a
// clean stop then took the stopped node's partitions a round late.
func (l *Leases) read() {
	if l.reading != nil {
		return
	}
	l.reloaded = time.Now()
	r := make(chan viewRead, 1)
	l.reading = r
	timeout := l.opTimeout()
	go func() {
		w, view, err := l.watch(time.After(timeout))
		r <- viewRead{w, view, err}
	}()
}

// took makes the view what read r found, and reports whether it did; a
// read that failed leaves the view as it was.
func (l *Leases) took(r viewRead) bool {
	if l.reloadFailed = r.err != nil; l.reloadFailed {
		l.cfg.Logger.Warn("watching leases", "component", "cluster", "err", r.err)
		return false
	}
	l.unseen = 0 // the view is as of its start
	for key, v := range r.view {
		r.view[key] = l.sinceFirstSeen(key, v)
	}
	l.view = r.view
	l.publishOwners()
	return true
}

// watch starts a watch of the bucket and reads the entries it holds now,
// until the watch marks their end or timeout fires (nil: never).
func (l *Leases) watch(timeout <-chan time.Time) (jetstream.KeyWatcher, map[string]leaseValue, error) {
	w, err := l.startWatch(timeout)
	if err != nil {
		return nil, nil, err
	}
	view := map[string]leaseValue{}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				stopWatch(w)
				return nil, nil, errors.New("the watch ended before its first values")
			}
			if e == nil { // the initial values are all in
				return w, view, nil
			}
			if v, ok := decodeLease(e); ok {
				view[e.Key()] = v
			}
		case <-timeout:
			stopWatch(w)
			return nil, nil, errors.New("the bucket's first values did not come in time")
		}
	}
}

// startWatch starts a watch of the bucket, or gives up when timeout fires
// (nil: never). The watch cannot be given a deadline of its own: it ends
// with its context. Its start is a JetStream request that, while the
// bucket's stream has no leader, waits out nats.go's timeout (5 s); a read
// of the view gives up on it sooner (read), and the next read tries again.
func (l *Leases) startWatch(timeout <-chan time.Time) (jetstream.KeyWatcher, error) {
	type started struct {
		w   jetstream.KeyWatcher
		err error
	}
	done := make(chan started, 1)
	go func() {
		w, err := l.kv.WatchAll(context.Background())
		done <- started{w, err}
	}()
	select {
	case s := <-done:
		return s.w, s.err
	case <-timeout:
		go func() {
			if s := <-done; s.err == nil {
				stopWatch(s.w)
			}
		}()
		return nil, errors.New("the watch did not start in time")
	}
}

// stopWatch stops w on a goroutine of its own: the stop deletes the
// watch's consumer, a JetStream request that nats.go gives 5 s, which a
// bucket without a leader waits out. Waited for, the stop of the watch
// that stalled held the lease loop up as long (4.7 s), right after the
// bucket's election, when the paused node's partitions were to be taken.
func stopWatch(w jetstream.KeyWatcher) { go func() { _ = w.Stop() }() }

// observe applies one watched entry to the view and reports whether it
// calls for a round now: a lease or heartbeat gone, or a node arrived.
func (l *Leases) observe(e jetstream.KeyValueEntry) bool {
	l.saw(e.Revision())
	key := e.Key()
	_, known := l.view[key]
	if e.Operation() != jetstream.KeyValuePut {
		delete(l.view, key)
		l.publishOwners()
		return known
	}
	v, ok := decodeLease(e)
	if !ok {
		l.cfg.Logger.Warn("unreadable lease entry", "component", "cluster", "key", key)
		return false
	}
	l.view[key] = l.sinceFirstSeen(key, v)
	l.publishOwners()
	return !known && strings.HasPrefix(key, "node.")
}

// sinceFirstSeen is v, read for key just now, with seen kept from the view
// when the view already held that revision: reap counts a revision's age
// from when this node first saw it.
func (l *Leases) sinceFirstSeen(key string, v leaseValue) leaseValue {
	if old, ok := l.view[key]; ok && old.rev == v.rev {
		v.seen = old.seen
	}
	return v
}

// decodeLease reads a watched entry that holds a lease or heartbeat.
func decodeLease(e jetstream.KeyValueEntry) (leaseValue, bool) {
	if e.Operation() != jetstream.KeyValuePut {
		return leaseValue{}, false
	}
	var v leaseValue
	if json.Unmarshal(e.Value(), &v) != nil {
		return leaseValue{}, false
	}
	v.rev, v.seen = e.Revision(), time.Now()
	return v, true
}

// Member is a live node of the cluster: its id and when it started.
type Member struct {
	Node  string
	Since time.Time
}

// Members lists the live nodes (whose heartbeat has not expired), by id,
// as last watched.
func (l *Leases) Members() []Member {
	if m := l.members.Load(); m != nil {
		return *m
	}
	return nil
}

// publishOwners copies each partition's owner, and the live nodes, from
// view for Owner and Members.
func (l *Leases) publishOwners() {
	o := make([]string, l.cfg.Partitions)
	for p := range o {
		o[p] = l.view[partitionKey(p)].Node
	}
	l.owners.Store(&o)
	var m []Member
	for key, v := range l.view {
		if strings.HasPrefix(key, "node.") {
			m = append(m, Member{Node: v.Node, Since: v.Since})
		}
	}
	slices.SortFunc(m, func(a, b Member) int { return strings.Compare(a.Node, b.Node) })
	l.members.Store(&m)
}

// idleWatcher stands in for a watch that could not be started.
type idleWatcher struct{}

func (idleWatcher) Updates() <-chan jetstream.KeyValueEntry { return nil }
func (idleWatcher) Stop() error                             { return nil }

// opTimeout bounds one bucket operation: a round must end in time to renew.
func (l *Leases) opTimeout() time.Duration { return min(l.cfg.Renew, 2*time.Second) }

func (l *Leases) value(since time.Time) []byte {
	b, _ := json.Marshal(leaseValue{Node: l.cfg.Node, Run: l.runID, Since: since})
	return b
}

// validity is how long after a successful write's start a lease counts as
// held: the TTL less a tenth, for the difference between this node's clock
// rate and the server's.
func (l *Leases) validity() time.Duration { return l.cfg.TTL - l.cfg.TTL/10 }

// round renews the heartbeat and every lease, then balances. The writes
// go at once: one after the other, each waited out its timeout while the
// bucket had no leader, and a node holding 20 partitions tried the last
// one's renewal 40 s into an election of 4-9 s, its lease long lost.
func (l *Leases) round(since time.Time) {
	if g := l.cfg.gate; g != nil {
		g.Lock()
		g.Unlock() //nolint:staticcheck // an empty critical section: the wait is the point
	}
	var renewals sync.WaitGroup
	for p := range l.owned {
		if ls := l.owned[p].Load(); ls != nil {
			renewals.Go(func() { l.renew(p, ls) })
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.opTimeout())
	rev, err := l.kv.Put(ctx, nodeKey(l.cfg.Node), l.value(since))
	cancel()
	if err != nil {
		l.cfg.Logger.Warn("renewing the node's heartbeat", "component", "cluster", "err", err)
	} else {
		l.wrote(rev)
	}
	renewals.Wait()
	if err == nil && !l.answered {
		l.answeredSince = time.Now()
	}
	if l.answered = err == nil; l.answered {
		l.reap()
		l.balance()
	}
}

// untilReap is how long until an entry of another run is due to go (a
// TTL after this node first saw its revision; see reap), but no sooner
// than a quarter of a round: an entry spared is due again at once.
func (l *Leases) untilReap() time.Duration {
	next := l.cfg.TTL // nothing due: a round comes first
	for _, v := range l.view {
		if v.Run != l.runID {
			next = min(next, time.Until(v.seen.Add(l.cfg.TTL)))
		}
	}
	return max(next, l.cfg.Renew/4)
}

// reap deletes, each at the revision last seen, the leases and heartbeats
// of other runs that this node has seen unchanged for a whole TTL: their
// writer stopped renewing them. The bucket expires them only bucketTTLs
// TTLs after their last write (LeaseBucketConfig), and only its stream's
// leader does, which one newly elected after the old one died has been
// seen to do many seconds late. Deleting is safe by time: the
// writer counted the entry as held for at most TTL less a tenth after it
// sent the write, which is before this node saw it; and by revision: a
// renewal since makes the delete fail.
func (l *Leases) reap() {
	changed := false
	defer func() {
		if changed {
			l.publishOwners()
		}
	}()
	var servers map[string]bool // read once, if anything is to go
	for key, v := range l.view {
		if v.Run == l.runID || time.Since(v.seen) < l.cfg.TTL {
			continue
		}
		if servers == nil {
			var ok bool
			if servers, ok = l.servers(); !ok {
				return // the bucket does not answer: the next round tries again
			}
		}
		answers, known := servers[v.Node]
		switch hb, ok := l.view[nodeKey(v.Node)]; {
		case ok && hb.Run == v.Run && answers:
			// Its process is up (its server answers the bucket's leader):
			// its writes were held up as this node's were, by an election
			// of the bucket's leader, and are only late. Deleted, every
			// lease of a survivor whose round came second went.
			continue
		case !known && time.Since(l.answeredSince) < l.cfg.TTL:
			// The bucket cannot say whether its server answers (with an
			// external NATS, no server is named after a node), and this
			// node's own writes landed again less than a TTL ago: the
			// other's may be only as late as this node's were.
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.opTimeout())
		err := l.kv.Delete(ctx, key, jetstream.LastRevision(v.rev))
		if err == nil {
			cancel()
			l.cfg.Logger.Info("expired an unrenewed lease", "component", "cluster", "key", key, "node", v.Node)
			delete(l.view, key)
			changed = true
			continue
		}
		if !jserr.WrongLastSequence(err) {
			cancel()
			l.cfg.Logger.Warn("expiring an unrenewed lease", "component", "cluster", "key", key, "err", err)
			return // the bucket does not answer: the next round tries again
		}
		// Rewritten since this node saw it (the watch is behind): read it.
		e, err := l.kv.Get(ctx, key)
		cancel()
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			delete(l.view, key)
			changed = true
		case err == nil:
			if cur, ok := decodeLease(e); ok {
				l.view[key] = cur
				changed = true
			}
		}
	}
}

// servers returns the servers that hold the lease bucket, by name, each
// with whether the bucket's stream leader hears from it: itself, and the
// copies it has heard from within two of its heartbeats. A server absent
// is none of the bucket's (all are, if the bucket has one server and does
// not say). A cluster's embedded servers are named after their nodes; with
// an external NATS no name is a node's. A paused or dead server has not
// answered for a TTL by the time its node's leases are due to go. ok is
// false if the bucket did not answer.
func (l *Leases) servers() (map[string]bool, bool) {
	if l.cfg.answering != nil {
		return l.cfg.answering(), true
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.quickTimeout())
	defer cancel()
	st, err := l.kv.Status(ctx)
	if err != nil {
		return nil, false
	}
	servers := map[string]bool{}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || bs.StreamInfo() == nil || bs.StreamInfo().Cluster == nil {
		return servers, true
	}
	c := bs.StreamInfo().Cluster
	if c.Leader != "" {
		servers[c.Leader] = true
	}
	for _, r := range c.Replicas {
		// Not Current: a leader elected a moment ago reports the old
		// leader current from what it knew as a follower, paused or not.
		// Active is 0 for a copy it has not heard from since.
		servers[r.Name] = !r.Offline && r.Active > 0 && r.Active < answerWithin
	}
	return servers, true
}

// answerWithin is how recently a stream's leader must have heard from a
// copy's server for it to count as answering: two of nats-server's raft
// heartbeats.
const answerWithin = 2 * time.Second

// renew rewrites p's lease at its revision. A lease taken or expired is
// lost at once. One that could not be written (the bucket without a
// leader, or out of reach) lapses when its validity ends: Owns says no,
// and the partition is not served, but it is kept and renewed again next
// round. A renewal that lands proves no other write took it; only the
// bucket's answer that one did gives it up. Given up on lapsing instead,
// every lease of the survivors went when the bucket's election outlasted
// their validity, and each of their partitions was taken afresh.
func (l *Leases) renew(p int, ls *lease) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), l.opTimeout())
	defer cancel()
	rev, err := l.kv.Update(ctx, partitionKey(p), l.value(time.Now().UTC()), ls.rev)
	holder := "not read" // what holds the key instead, for the log
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		// An earlier renewal that timed out may have landed: the lease is
		// still this run's if the latest revision is its own write (no one
		// can take a lease between two writes of its owner). The read gets
		// a timeout of its own (the update may have used ctx up), and one
		// that fails tells nothing: the lease is kept, as after a renewal
		// that timed out, rather than given up on no answer.
		rctx, rcancel := context.WithTimeout(context.Background(), l.opTimeout())
		defer rcancel()
		e, gerr := l.kv.Get(rctx, partitionKey(p))
		switch {
		case gerr == nil:
			cur, ok := decodeLease(e)
			if ok && cur.Run == l.runID {
				rev, err = l.kv.Update(rctx, partitionKey(p), l.value(time.Now().UTC()), cur.rev)
			}
			holder = fmt.Sprintf("node %s's run %s, revision %d", cur.Node, cur.Run, e.Revision())
		case !errors.Is(gerr, jetstream.ErrKeyNotFound) && !errors.Is(gerr, jetstream.ErrKeyDeleted):
			err = gerr
		default:
			holder = "none: deleted"
		}
	}
	switch {
	case err == nil:
		l.owned[p].Store(&lease{epoch: ls.epoch, rev: rev, until: start.Add(l.validity()), open: ls.open})
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyNotFound),
		errors.Is(err, jetstream.ErrKeyDeleted):
		l.cfg.Logger.Warn("partition lease lost", "component", "cluster", "partition", p, "err", err,
			"revision", ls.rev, "holder", holder)
		l.lose(p)
	case !time.Now().Before(ls.until):
		if !ls.lapsed {
			l.cfg.Logger.Warn("partition lease lapsed: not served until a renewal lands", "component", "cluster", "partition", p, "err", err)
			l.owned[p].Store(&lease{epoch: ls.epoch, rev: ls.rev, until: ls.until, lapsed: true, open: ls.open})
		}
	default:
		l.cfg.Logger.Warn("renewing a partition lease", "component", "cluster", "partition", p, "err", err)
	}
}

// lose stops reporting p as owned at once and releases it in the
// background; then, if given, runs after (the lease's deletion).
func (l *Leases) lose(p int, then ...func()) {
	old := l.owned[p].Swap(nil)
	l.releasing[p].Store(true)
	l.releases.Add(1)
	go func() {
		defer l.releases.Done()
		// Released once no Acquire runs (one running would undo it), and
		// only if one succeeded: Owns never reported p otherwise.
		if old != nil {
			<-old.open.done
		}
		if old == nil || old.open.ok.Load() {
			l.cfg.Release(p)
		}
		for _, fn := range then {
			fn()
		}
		l.releasing[p].Store(false)
	}()
}

// balance takes free partitions while this node holds fewer than its fair
// share of the live nodes, and hands partitions over while it holds more
// and another node holds fewer.
func (l *Leases) balance() {
	counts := map[string]int{}
	for key, v := range l.view {
		if strings.HasPrefix(key, "node.") {
			counts[v.Node] += 0
		}
	}
	counts[l.cfg.Node] += 0
	for p := range l.cfg.Partitions {
		if v, ok := l.view[partitionKey(p)]; ok {
			if _, live := counts[v.Node]; live {
				counts[v.Node]++
			}
		}
	}
	mine := 0 // held, lapsed leases too (see renew)
	for p := range l.owned {
		if l.owned[p].Load() != nil {
			mine++
		}
	}
	share := fairShare(l.cfg.Partitions, len(counts))
	switch {
	case mine < share:
		var takes sync.WaitGroup
		tried := 0
		for _, p := range l.pref {
			if mine >= share || tried >= takesPerRound {
				break
			}
			if l.owned[p].Load() != nil || l.releasing[p].Load() {
				continue
			}
			// A lease of another node, or of an earlier run of this one,
			// is left to expire: only the run that wrote it knows it is
			// not still serving (paused, or cut off from the cluster).
			v, held := l.view[partitionKey(p)]
			if held && v.Run != l.runID {
				continue
			}
			if !l.takeDue(p) {
				continue
			}
			mine++ // a take that fails is tried again next round
			tried++
			takes.Go(func() { l.acquire(p, v, held) })
		}
		takes.Wait()
	case mine > share:
		short := 0
		for node, n := range counts {
			if node != l.cfg.Node && n < share {
				short += share - n
			}
		}
		give := min(mine-share, short, movesPerRound)
		for i := len(l.pref) - 1; i >= 0 && give > 0; i-- {
			p := l.pref[i]
			if ls := l.owned[p].Load(); ls != nil {
				l.giveBack(p, ls)
				give--
			}
		}
	}
}

// takeDue reports whether p may be taken now: not within a quarter of a
// round of a take that failed in Acquire.
func (l *Leases) takeDue(p int) bool {
	failed := l.takeFailed[p].Load()
	return failed == 0 || time.Since(time.Unix(0, failed)) >= l.cfg.Renew/4
}

// acquire takes partition p: by creating its lease, or, when the view shows
// it held by this run (a Create that timed out but landed), by rewriting
// that lease at its revision. It reports whether p is now held; it is
// served once open's Acquire succeeds.
func (l *Leases) acquire(p int, old leaseValue, held bool) bool {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), l.opTimeout())
	defer cancel()
	var (
		rev uint64
		err error
	)
	if held {
		rev, err = l.kv.Update(ctx, partitionKey(p), l.value(time.Now().UTC()), old.rev)
	} else {
		rev, err = l.kv.Create(ctx, partitionKey(p), l.value(time.Now().UTC()))
	}
	if err != nil {
		// Taken first by another node, or the bucket unreachable: the
		// watch or the next round tells which.
		return false
	}
	o := &opening{done: make(chan struct{})}
	l.owned[p].Store(&lease{epoch: rev, rev: rev, until: start.Add(l.validity()), open: o})
	l.opens.Add(1)
	go l.open(p, rev, o)
	return true
}

// open calls Acquire for p's lease of the given epoch until it succeeds,
// fails without ErrTryAgain (the run loop then gives the lease back), or
// the lease is no longer held.
func (l *Leases) open(p int, epoch uint64, o *opening) {
	defer l.opens.Done()
	defer close(o.done)
	for {
		err := l.cfg.Acquire(p, epoch)
		if err == nil {
			o.ok.Store(true)
			l.cfg.Logger.Info("partition taken", "component", "cluster", "partition", p, "epoch", epoch)
			return
		}
		l.cfg.Logger.Warn("taking a partition", "component", "cluster", "partition", p, "err", err)
		if !errors.Is(err, ErrTryAgain) {
			l.failTake(p, o)
			return
		}
		select {
		case <-l.stop:
			return
		case <-time.After(l.cfg.Renew / 4):
		}
		if ls := l.owned[p].Load(); ls == nil || ls.open != o {
			return
		}
	}
}

// GiveUp hands p over if this node holds it at epoch, as a lease whose
// Acquire failed for good is: its owner can no longer write the partition
// (its log was fenced under it). Another node takes it, or this one a
// quarter of a round later, afresh.
func (l *Leases) GiveUp(p int, epoch uint64) {
	ls := l.owned[p].Load()
	if ls == nil || ls.epoch != epoch {
		return // lost or given back already
	}
	l.cfg.Logger.Warn("giving a partition up: its log cannot be written", "component", "cluster", "partition", p, "epoch", epoch)
	l.failTake(p, ls.open)
}

// failTake marks p's take o as failed for good: run gives its lease back,
// and this node takes p again no sooner than takeDue allows.
func (l *Leases) failTake(p int, o *opening) {
	l.takeFailed[p].Store(time.Now().UnixNano())
	o.failed.Store(true)
	select {
	case l.takesFailed <- struct{}{}:
	default:
	}
}

// giveBackFailed gives back the leases whose Acquire failed for good, or
// that were given up, so another node can take them at once.
func (l *Leases) giveBackFailed() {
	for p := range l.owned {
		if ls := l.owned[p].Load(); ls != nil && ls.open.failed.Load() {
			l.giveBack(p, ls)
		}
	}
}

// giveBack hands p over: Owns stops reporting it, and in the background
// Release runs, then the lease is deleted at its revision so another node
// can take it at once (or, if the bucket does not answer, it expires).
func (l *Leases) giveBack(p int, ls *lease) {
	l.lose(p, func() {
		ctx, cancel := context.WithTimeout(context.Background(), l.opTimeout())
		defer cancel()
		if err := l.kv.Delete(ctx, partitionKey(p), jetstream.LastRevision(ls.rev)); err != nil {
			l.cfg.Logger.Warn("handing a partition over", "component", "cluster", "partition", p, "err", err)
			return
		}
		l.cfg.Logger.Info("partition handed over", "component", "cluster", "partition", p)
	})
}

// finish ends the loop: on Stop every partition is handed over and the
// heartbeat deleted; on halt nothing is (the leases expire).
func (l *Leases) finish() {
	defer l.releases.Wait()
	defer l.opens.Wait()
	if !l.handover.Load() {
		return
	}
	for p := range l.owned {
		if ls := l.owned[p].Load(); ls != nil {
			l.giveBack(p, ls)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.opTimeout())
	defer cancel()
	_ = l.kv.Delete(ctx, nodeKey(l.cfg.Node))
}
