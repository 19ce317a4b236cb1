package jslog

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/internal/jserr"
	"github.com/plaudit/plaudit/persist"
)

// DirStream is the cluster's directory: every directory write, in order,
// on the subject plaudit.dir, or, for a unique key, on
// plaudit.dir.claim.<hash of the key> (its claim, then its confirmation).
// Each node mirrors it into its local store, where reads are served.
const (
	DirStream     = "PLAUDIT_DIR"
	dirSubject    = "plaudit.dir"
	claimSubjects = dirSubject + ".claim.*"
)

// claimSubject is the subject of a unique key's claim: JetStream refuses a
// claim there unless the subject is as the claimer last saw it (an expected
// last sequence per subject, 0 for a first write), which makes a unique
// key's check and write one step, whichever node writes.
func claimSubject(key []byte) string {
	sum := sha256.Sum256(key)
	return dirSubject + ".claim." + hex.EncodeToString(sum[:16])
}

// appliedKey holds, in the local store, the stream sequence of the last
// directory write applied there. Keys starting with reservedPrefix are the
// mirror's: refused to callers and hidden from their scans.
var (
	reservedPrefix = []byte("\xffjslog/")
	appliedKey     = []byte("\xffjslog/applied")
)

// Local is the directory of a node's own store (pebblelog.Store), which the
// mirror writes and reads are served from. The mirror does not wait for
// its writes to reach the disk: each carries the mirror's position, so
// after a crash it goes on from the last one that did, and the stream
// holds every write durably (synced, one after another, the mirror's
// writes bounded every keyed write of the cluster).
type Local interface {
	Get(key []byte) ([]byte, error)
	PutUnsynced(kvs ...persist.KV) error
	DeleteRangeUnsynced(start, end []byte) error
	Scan(prefix []byte, fn func(key, value []byte) error) error
}

// Directory is the directory half of persist.Store for a cluster node: a
// write goes to DirStream and returns once this node's mirror has applied
// it, so a node reads its own writes; a read is served by the mirror, and a
// Get that misses first waits for the mirror to reach the stream's end, so
// it never answers "absent" for a key written before it began on any node.
// A Scan reads the mirror as it is: a write made on another node a moment
// ago may be missing from it.
type Directory struct {
	js      jetstream.JetStream
	stream  jetstream.Stream
	local   Local
	timeout time.Duration
	window  time.Duration
	now     func() time.Time

	// The mirror's consumer: remirror replaces it when it stalls, and
	// apply takes the messages of the current one (gen) only.
	mirrorMu    sync.Mutex
	cc          jetstream.ConsumeContext
	gen         uint64
	closed      bool
	remirroring atomic.Bool
	stopWatch   chan struct{} // closed by Close: ends watch

	mu      sync.Mutex
	applied uint64
	advance chan struct{} // closed and replaced whenever applied moves
	failed  error         // the mirror stopped: a write it could not apply

	onApply atomic.Pointer[func([]persist.KV)]

	// The CatchUps waiting for the stream's end share its query: next is
	// the round the next query answers, made by the first CatchUp after a
	// query was sent, so a round never began before any of its CatchUps.
	endMu    sync.Mutex
	next     *endRound
	querying bool
}

// endRound is one query of the stream's last sequence, shared.
type endRound struct {
	done chan struct{}
	seq  uint64
	err  error
}

// OnApply makes fn see every Put the mirror applies, from any node (this
// one's included), once it is in the local store: for what a node keeps in
// memory of the directory (the tenancy). fn runs on the mirror's goroutine,
// before the write's caller returns; it must not write to the directory.
func (d *Directory) OnApply(fn func(kvs []persist.KV)) { d.onApply.Store(&fn) }

// DirectoryConfig configures a Directory.
type DirectoryConfig struct {
	Replicas int           // of DirStream
	Timeout  time.Duration // bounds each write and each wait for the mirror (10s)
	// ClaimWindow is how long a claim holds its key unconfirmed before
	// another claim may take it over (the longer of a minute and six
	// Timeouts: a claimer's whole write, its claims, log append and its
	// settling, index and confirmations, each bounded by Timeout, fits
	// inside).
	ClaimWindow time.Duration
	Now         func() time.Time // the claims' clock (time.Now)
}

// OpenDirectory creates or opens DirStream and starts mirroring it into
// local from the last write local has applied; it returns once local holds
// every write the stream held when it was called.
func OpenDirectory(ctx context.Context, js jetstream.JetStream, local Local, cfg DirectoryConfig) (*Directory, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.ClaimWindow <= 0 {
		cfg.ClaimWindow = max(time.Minute, 6*cfg.Timeout)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	scfg := jetstream.StreamConfig{Name: DirStream, Subjects: []string{dirSubject, claimSubjects},
		Storage: jetstream.FileStorage, Replicas: max(cfg.Replicas, 1), Retention: jetstream.LimitsPolicy,
		Discard: jetstream.DiscardNew, DenyDelete: true, DenyPurge: true,
		// A write's tries (publishAfter) span at most its Timeout; the
		// leader keeps every message id this long, about 130 bytes each.
		Duplicates: max(2*cfg.Timeout, 20*time.Second)}
	s, err := ensureStream(ctx, js, scfg)
	if err == nil && !slices.Contains(s.CachedInfo().Config.Subjects, claimSubjects) {
		// Made by an earlier version, without the claims' subjects.
		cur := s.CachedInfo().Config
		cur.Subjects = scfg.Subjects
		s, err = js.UpdateStream(ctx, cur)
	}
	if err != nil {
		return nil, fmt.Errorf("jslog: directory stream: %w", err)
	}
	d := &Directory{js: js, stream: s, local: local, timeout: cfg.Timeout, window: cfg.ClaimWindow, now: cfg.Now,
		advance: make(chan struct{})}
	switch v, err := local.Get(appliedKey); {
	case errors.Is(err, persist.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("jslog: directory mirror: %w", err)
	case len(v) != 8:
		return nil, fmt.Errorf("jslog: directory mirror position of %d bytes: %w", len(v), persist.ErrCorrupt)
	default:
		d.applied = binary.BigEndian.Uint64(v)
	}
	d.gen = 1
	if d.cc, err = d.mirror(ctx, d.applied, d.gen); err != nil {
		return nil, err
	}
	// What this node's store holds may be behind: writes made while the
	// node was down, or applied here before a power cut but not yet synced
	// (a key revoked meanwhile must not be honoured from the stale copy).
	// Reads of the local store go on as soon as it returns.
	if err := d.CatchUp(); err != nil {
		d.cc.Stop()
		return nil, fmt.Errorf("jslog: directory mirror: %w", err)
	}
	d.stopWatch = make(chan struct{})
	go d.watch(d.stopWatch)
	return d, nil
}

// mirror starts a consumer of the stream after sequence applied, whose
// messages apply takes as generation gen's.
func (d *Directory) mirror(ctx context.Context, applied, gen uint64) (jetstream.ConsumeContext, error) {
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: []string{dirSubject, claimSubjects}}
	if applied > 0 {
		occ.DeliverPolicy, occ.OptStartSeq = jetstream.DeliverByStartSequencePolicy, applied+1
	}
	cons, err := d.stream.OrderedConsumer(ctx, occ)
	if err != nil {
		return nil, fmt.Errorf("jslog: directory mirror: %w", err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) { d.apply(gen, m) })
	if err != nil {
		return nil, fmt.Errorf("jslog: directory mirror: %w", err)
	}
	return cc, nil
}

// mirrorStall is how long a write waits for the mirror to move before the
// mirror is made afresh (remirror).
const mirrorStall = 3 * time.Second

// remirror replaces the mirror's consumer, which has not moved past
// sequence at for mirrorStall while a write waited for a later one. The
// consumer (one copy, an ordered consumer) lives on one server of
// JetStream's choosing; when that server stops, nats.go makes it afresh
// only after two missed heartbeats (10 s), and a consumer it made while
// JetStream was electing leaders was seen never to move again (a node's
// directory writes were then refused for a minute). One remirror runs at
// a time, until its consumer is made; a write that still waits after it
// asks again after another stall.
func (d *Directory) remirror(at uint64) {
	if !d.remirroring.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer d.remirroring.Store(false)
		// Under mirrorMu no message is being applied: the old consumer's
		// are dropped from the bump on, and the new one starts after the
		// last one applied.
		d.mirrorMu.Lock()
		d.mu.Lock()
		applied := d.applied
		d.mu.Unlock()
		if d.closed || applied != at { // closing, or it moved meanwhile
			d.mirrorMu.Unlock()
			return
		}
		d.gen++
		gen, old := d.gen, d.cc
		d.mirrorMu.Unlock()
		old.Stop()
		// The old consumer is stopped: the new one is made until it is,
		// whether or not a write still waits (other nodes' writes, a key
		// revoked among them, reach this node's mirror through it alone).
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
			ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
			cc, err := d.mirror(ctx, applied, gen)
			cancel()
			d.mirrorMu.Lock()
			switch {
			case err == nil && !d.closed:
				d.cc = cc
				d.mirrorMu.Unlock()
				return
			case err == nil:
				cc.Stop()
				fallthrough
			case d.closed:
				d.mirrorMu.Unlock()
				return
			}
			d.mirrorMu.Unlock()
			time.Sleep(wait)
		}
	}()
}

// watch makes the mirror afresh when it has not moved for mirrorStall
// while the stream has held more than it applied for a second or longer.
// A write or a Get that waits for the mirror does the same (wait); watch
// is for a node nothing waits on, whose reads (a key revoked on another
// node among them) were served from the mirror as it stood until nats.go
// made the consumer again, 10 s or more after its server stopped. The
// stream's end is read only when the mirror did not move for a tick, at
// most once a mirrorStall: one JetStream request a node every 3 s while
// the directory is quiet.
func (d *Directory) watch(stop <-chan struct{}) {
	const every = time.Second
	tick := time.NewTicker(every)
	defer tick.Stop()
	var (
		seen          uint64    // the mirror's position at the last tick
		still         time.Time // since when it has been there
		want          uint64    // the stream's end when it was beyond seen, read at wantAt
		wantAt, asked time.Time
	)
	for {
		var now time.Time
		select {
		case <-stop:
			return
		case now = <-tick.C:
		}
		d.mu.Lock()
		applied := d.applied
		d.mu.Unlock()
		switch {
		case applied != seen || still.IsZero():
			seen, still, want = applied, now, 0
		case want > applied && now.Sub(wantAt) >= every && now.Sub(still) >= mirrorStall:
			d.remirror(applied)
			still, want = now, 0
		case want == 0 && now.Sub(asked) >= mirrorStall:
			asked = now
			ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
			if end, err := d.end(ctx); err == nil && end > applied {
				want, wantAt = end, now
			}
			cancel()
		}
	}
}

// Close stops mirroring.
func (d *Directory) Close() {
	d.mirrorMu.Lock()
	if !d.closed && d.stopWatch != nil {
		close(d.stopWatch)
	}
	d.closed = true
	cc := d.cc
	d.mirrorMu.Unlock()
	cc.Stop()
}

// apply writes one directory write into the local store, with the mirror's
// position in the same batch where it can (a DeleteRange is followed by
// the position: applied again after a crash, it deletes the same keys).
// A message of a consumer that remirror replaced (gen) is dropped: the
// new one delivers from where the mirror stood.
func (d *Directory) apply(gen uint64, m jetstream.Msg) {
	d.mirrorMu.Lock()
	defer d.mirrorMu.Unlock()
	if gen != d.gen {
		return
	}
	meta, err := m.Metadata()
	if err != nil {
		return
	}
	seq := meta.Sequence.Stream
	d.mu.Lock()
	stale := seq <= d.applied || d.failed != nil
	d.mu.Unlock()
	if stale {
		return
	}
	pos := persist.KV{Key: appliedKey, Value: binary.BigEndian.AppendUint64(nil, seq)}
	op, err := decodeDirOp(m.Data())
	if err == nil {
		if op.claim != nil {
			err = d.local.PutUnsynced(pos) // unconfirmed: nothing to read yet
		} else if op.end != nil {
			if err = d.local.DeleteRangeUnsynced(op.start, op.end); err == nil {
				err = d.local.PutUnsynced(pos)
			}
		} else {
			err = d.local.PutUnsynced(append(op.kvs, pos)...)
		}
	}
	if fn := d.onApply.Load(); err == nil && op.end == nil && op.claim == nil && fn != nil {
		(*fn)(op.kvs)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.failed = fmt.Errorf("jslog: directory write %d not applied: %w", seq, err)
	} else {
		d.applied = seq
	}
	close(d.advance)
	d.advance = make(chan struct{})
}

// wait returns once the mirror has applied stream sequence seq, which the
// stream holds. A mirror that does not move for mirrorStall meanwhile is
// made afresh.
func (d *Directory) wait(ctx context.Context, seq uint64) error {
	var stall *time.Timer // made only when the mirror is behind: it usually is not
	for {
		d.mu.Lock()
		applied, failed, advance := d.applied, d.failed, d.advance
		d.mu.Unlock()
		if applied >= seq {
			return nil
		}
		if failed != nil {
			return failed
		}
		if stall == nil {
			stall = time.NewTimer(mirrorStall)
			defer stall.Stop()
		}
		select {
		case <-advance:
			stall.Reset(mirrorStall)
		case <-stall.C:
			d.remirror(applied)
			stall.Reset(mirrorStall)
		case <-ctx.Done():
			return fmt.Errorf("jslog: directory mirror behind (at %d, want %d): %w", applied, seq, ctx.Err())
		}
	}
}

// publish writes op on subject and returns once this node's mirror has
// applied it.
func (d *Directory) publish(subject string, op dirOp) error {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	data, opts := encodeDirOp(op), []jetstream.PublishOpt{jetstream.WithExpectStream(DirStream), jetstream.WithMsgID(rand.Text())}
	ack, err := inTries(ctx, sendTry, func(try context.Context) (*jetstream.PubAck, error) {
		return d.js.Publish(try, subject, data, opts...)
	})
	if err != nil {
		return fmt.Errorf("jslog: directory write: %w", err)
	}
	return d.wait(ctx, ack.Sequence)
}

// publishAfter writes op on a claim's subject, expecting the subject's
// last write at stream sequence after (0: none). A refusal that does not
// answer the expectation (jserr.InFlight: another write on the subject is
// in flight, or was acknowledged a moment ago, the claimer's own claim
// among them) is sent again until ctx ends. Taken for a lost
// compare-and-set, it failed the confirmation of a claim nothing had
// taken over.
//
// Every write of the directory carries a message id of its own and is sent
// in tries (see inTries): a stream leader that steps down or dies drops
// the writes it has not stored, unanswered, and one sent once for the
// whole timeout held its caller up for all of it, then failed. A try after
// a stored one is answered as its duplicate, with its sequence, by a
// replicated stream; a stream of one copy checks the expectation first and
// refuses it, so a refusal after tries that went unanswered looks at the
// subject's last write, which is then this one's own.
func (d *Directory) publishAfter(ctx context.Context, subject string, op dirOp, after uint64) (*jetstream.PubAck, error) {
	data, id := encodeDirOp(op), rand.Text()
	opts := []jetstream.PublishOpt{jetstream.WithExpectStream(DirStream), jetstream.WithExpectLastSequencePerSubject(after),
		jetstream.WithMsgID(id)}
	tries := 0
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		ack, err := inTries(ctx, sendTry, func(try context.Context) (*jetstream.PubAck, error) {
			tries++
			return d.js.Publish(try, subject, data, opts...)
		})
		if tries > 1 && jserr.WrongLastSequence(err) && !jserr.InFlight(err) {
			last, err2 := d.stream.GetLastMsgForSubject(ctx, subject)
			if err2 == nil && last.Header.Get(jetstream.MsgIDHeader) == id {
				return &jetstream.PubAck{Stream: DirStream, Sequence: last.Sequence, Duplicate: true}, nil
			}
		}
		if !jserr.InFlight(err) {
			return ack, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
}

// A Claim holds a unique key for a write that has not landed yet. No read
// sees the key until Confirm. A claim left unconfirmed past its window
// (its writer crashed, or its write failed after the claim) may be taken
// over by another, unless its write did land (see StaleClaim), so a key is
// never held for good by a write that never happened; a claim taken over
// cannot be confirmed.
type Claim struct {
	kv      persist.KV
	subject string
	seq     uint64 // the claim's stream sequence
}

// A Claimer is the agent batch a claim is made for: its agent and the
// sequence of its first event; zero for a write of no agent's batch.
type Claimer struct {
	Agent string
	First uint64
}

// StaleClaim is Claim's answer for a key held by an unconfirmed claim past
// its window that an agent's batch made: whether that batch reached its
// log, where the directory cannot see, decides between TakeOver and
// restoring that batch's index (Store.claimKey).
type StaleClaim struct {
	Claimer // the batch that made it
	Entry   persist.KV
	seq     uint64 // its stream sequence
}

func (e *StaleClaim) Error() string {
	return fmt.Sprintf("jslog: directory key %q: claimed, unconfirmed, by agent %s's batch at %d", e.Entry.Key, e.Agent, e.First)
}

// errInFlight is wrapped, with persist.ErrExists, by Claim's refusal of a
// key that a write not confirmed yet holds: a claim within its window, or
// a write the stream's leader has not stored yet. That write may still
// fail and free the key, which a confirmed one never does.
var errInFlight = errors.New("held by a write in flight")

// Claim claims kv's key for kv, made by by's batch, unless another write
// holds it: confirmed (and not deleted since), or claimed within its
// window, on any node (an unconfirmed claim of this very entry does not
// hold it). Then it returns ErrExists (with errInFlight for a claim) and
// writes nothing. A key held by an agent batch's claim past its window is
// *StaleClaim. A claim whose answer was lost may have landed: the key is
// then held until its window passes.
func (d *Directory) Claim(kv persist.KV, by Claimer) (Claim, error) {
	if len(kv.Key) == 0 || kv.Value == nil || bytes.HasPrefix(kv.Key, reservedPrefix) {
		return Claim{}, fmt.Errorf("claim %q: %w", kv.Key, persist.ErrInvalid)
	}
	kv.Unique = false
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	c, err := d.claimAfter(ctx, kv, by, 0)
	if !jserr.WrongLastSequence(err) {
		return c, err
	}
	taken := fmt.Errorf("jslog: directory key %q: %w", kv.Key, persist.ErrExists)
	inFlight := fmt.Errorf("jslog: directory key %q: %w: %w", kv.Key, errInFlight, persist.ErrExists)
	last, err := d.stream.GetLastMsgForSubject(ctx, c.subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		// The write that holds the key is on its way: a replicated
		// stream's leader checks claims against writes it has not stored
		// yet.
		return Claim{}, inFlight
	case err != nil:
		return Claim{}, fmt.Errorf("jslog: directory claim: %w", err)
	}
	held, err := decodeDirOp(last.Data)
	if err != nil {
		return Claim{}, fmt.Errorf("jslog: directory claim %d: %w", last.Sequence, err)
	}
	h := held.claim
	if h == nil {
		// Confirmed. It holds the key while the directory does: a key
		// deleted since (an Idempotency-Key record past its time) is free.
		if err := d.CatchUp(); err != nil {
			return Claim{}, err
		}
		if _, err := d.local.Get(kv.Key); !errors.Is(err, persist.ErrNotFound) {
			return Claim{}, taken
		}
		return d.TakeOver(kv, by, last.Sequence)
	}
	switch {
	case d.now().Before(h.until) && !bytes.Equal(h.kv.Value, kv.Value):
		return Claim{}, inFlight
	case h.by.Agent != "" && !bytes.Equal(h.kv.Value, kv.Value):
		return Claim{}, &StaleClaim{Claimer: h.by, Entry: h.kv, seq: last.Sequence}
	}
	// Past its window, or a claim of this very entry (its retry, or its
	// recovery from the log): no need to wait it out.
	return d.TakeOver(kv, by, last.Sequence)
}

// TakeOver claims kv's key for kv in place of the unconfirmed claim at
// stream sequence seq (a StaleClaim's, or one Claim found past its
// window): ErrExists, with errInFlight, if anything was written there
// since.
func (d *Directory) TakeOver(kv persist.KV, by Claimer, seq uint64) (Claim, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	kv.Unique = false
	c, err := d.claimAfter(ctx, kv, by, seq)
	if jserr.WrongLastSequence(err) {
		return Claim{}, fmt.Errorf("jslog: directory key %q: %w: %w", kv.Key, errInFlight, persist.ErrExists)
	}
	return c, err
}

// claimAfter publishes a claim of kv's key expecting the last write on its
// subject at stream sequence after (0: none). A refusal is returned as
// JetStream gave it, with the claim's subject.
func (d *Directory) claimAfter(ctx context.Context, kv persist.KV, by Claimer, after uint64) (Claim, error) {
	c := Claim{kv: kv, subject: claimSubject(kv.Key)}
	ack, err := d.publishAfter(ctx, c.subject, dirOp{claim: &claimed{kv: kv, by: by, until: d.now().Add(d.window)}}, after)
	switch {
	case err == nil:
		c.seq = ack.Sequence
		return c, nil
	case jserr.WrongLastSequence(err):
		return c, err
	}
	return Claim{}, fmt.Errorf("jslog: directory claim: %w", err)
}

// Release frees c's key at once, for a claim whose write will never land
// (its batch was refused before its log append): a retry of that write,
// whose entry differs (a run made again has another id), would otherwise
// wait out the window. A claim taken over meanwhile is left as it is, and
// so is c if the release fails: its window frees it. It is written as a
// claim of no batch whose window ended at the Unix epoch, which any claim
// takes over.
func (d *Directory) Release(c Claim) {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	_, _ = d.publishAfter(ctx, c.subject, dirOp{claim: &claimed{kv: c.kv, until: time.Unix(0, 0)}}, c.seq)
}

// Confirm makes c's write, which has landed, what the key holds: it
// returns once this node's mirror has applied it. A claim taken over
// meanwhile is ErrExists.
func (d *Directory) Confirm(c Claim) error {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	ack, err := d.publishAfter(ctx, c.subject, dirOp{kvs: []persist.KV{c.kv}}, c.seq)
	switch {
	case jserr.WrongLastSequence(err):
		return fmt.Errorf("jslog: directory key %q: claim taken over: %w", c.kv.Key, persist.ErrExists)
	case err != nil:
		return fmt.Errorf("jslog: directory write: %w", err)
	}
	return d.wait(ctx, ack.Sequence)
}

// Put implements persist.Store.Put.
func (d *Directory) Put(kvs ...persist.KV) error {
	for _, kv := range kvs {
		if len(kv.Key) == 0 || bytes.HasPrefix(kv.Key, reservedPrefix) {
			return fmt.Errorf("put %q: %w", kv.Key, persist.ErrInvalid)
		}
	}
	if len(kvs) == 0 {
		return nil
	}
	return d.publish(dirSubject, dirOp{kvs: kvs})
}

// DeleteRange implements persist.Store.DeleteRange (the mirror's own keys
// are kept).
func (d *Directory) DeleteRange(start, end []byte) error {
	if len(start) == 0 || bytes.Compare(start, end) >= 0 {
		return fmt.Errorf("delete range [%q, %q): %w", start, end, persist.ErrInvalid)
	}
	if bytes.Compare(end, reservedPrefix) > 0 {
		end = reservedPrefix
		if bytes.Compare(start, end) >= 0 {
			return nil
		}
	}
	return d.publish(dirSubject, dirOp{start: start, end: end})
}

// Get implements persist.Store.Get.
func (d *Directory) Get(key []byte) ([]byte, error) {
	if bytes.HasPrefix(key, reservedPrefix) {
		return nil, persist.ErrNotFound
	}
	v, err := d.local.Get(key)
	if !errors.Is(err, persist.ErrNotFound) {
		return v, err
	}
	// Absent here may mean not applied yet: catch up with the stream's end.
	if err := d.CatchUp(); err != nil {
		return nil, err
	}
	return d.local.Get(key)
}

// Lag is how many directory writes the stream holds that this node's
// mirror has not applied yet.
func (d *Directory) Lag(ctx context.Context) (uint64, error) {
	info, err := d.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("jslog: directory: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return info.State.LastSeq - min(d.applied, info.State.LastSeq), nil
}

// CatchUp returns once the mirror has applied every directory write made
// before it was called, on any node.
func (d *Directory) CatchUp() error {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	seq, err := d.end(ctx)
	if err != nil {
		return err
	}
	return d.wait(ctx, seq)
}

// end returns the stream's last sequence, read after end was called. The
// callers of one moment share one query (a stream info is a JetStream API
// request, which its server answers one at a time): those that come while
// it is out wait for the next.
func (d *Directory) end(ctx context.Context) (uint64, error) {
	d.endMu.Lock()
	r := d.next
	if r == nil {
		r = &endRound{done: make(chan struct{})}
		d.next = r
		if !d.querying {
			d.querying = true
			go d.queryEnds()
		}
	}
	d.endMu.Unlock()
	select {
	case <-r.done:
		return r.seq, r.err
	case <-ctx.Done():
		return 0, fmt.Errorf("jslog: directory: %w", ctx.Err())
	}
}

// queryEnds answers the rounds, one query each, until none is waiting.
func (d *Directory) queryEnds() {
	for {
		d.endMu.Lock()
		r := d.next
		d.next = nil
		if r == nil {
			d.querying = false
			d.endMu.Unlock()
			return
		}
		d.endMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
		info, err := d.stream.Info(ctx)
		cancel()
		if err != nil {
			r.err = fmt.Errorf("jslog: directory: %w", err)
		} else {
			r.seq = info.State.LastSeq
		}
		close(r.done)
	}
}

// Scan implements persist.Store.Scan over the mirror as it is.
func (d *Directory) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return d.local.Scan(prefix, func(k, v []byte) error {
		if bytes.HasPrefix(k, reservedPrefix) {
			return nil
		}
		return fn(k, v)
	})
}

// dirOp is one directory write: kvs (Put), the range [start, end)
// (DeleteRange, end non-nil), or a unique key's unconfirmed claim (claim
// non-nil).
type dirOp struct {
	kvs        []persist.KV
	start, end []byte
	claim      *claimed
}

// claimed is an unconfirmed claim: the write it holds its key for, the
// batch that made it, and the end of its window.
type claimed struct {
	kv    persist.KV
	by    Claimer
	until time.Time
}

const (
	dirPut         = 1
	dirDeleteRange = 2
	dirClaim       = 3
)

// encodeDirOp: op(1), then for a put a count and {len key, has(1), [len
// value]}*, for a delete range {len start, len end}, for a claim {len key,
// len value, len agent, uvarint first, uvarint Unix nanoseconds of its
// window's end}; then CRC32C (4 bytes big-endian) of all before it.
func encodeDirOp(op dirOp) []byte {
	var out []byte
	if op.claim != nil {
		out = append(out, dirClaim)
		out = appendBytes(out, op.claim.kv.Key)
		out = appendBytes(out, op.claim.kv.Value)
		out = appendBytes(out, []byte(op.claim.by.Agent))
		out = binary.AppendUvarint(out, op.claim.by.First)
		out = binary.AppendUvarint(out, uint64(op.claim.until.UnixNano()))
	} else if op.end != nil {
		out = append(out, dirDeleteRange)
		out = appendBytes(out, op.start)
		out = appendBytes(out, op.end)
	} else {
		out = appendKVs(append(out, dirPut), op.kvs)
	}
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
}

func decodeDirOp(data []byte) (dirOp, error) {
	bad := func(what string) (dirOp, error) {
		return dirOp{}, fmt.Errorf("%w: %w: directory write: %s", persist.ErrCorrupt, errRecord, what)
	}
	if len(data) < 5 {
		return bad("too short")
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(data[len(data)-4:]) {
		return bad("checksum mismatch")
	}
	r := reader{buf: body[1:]}
	var op dirOp
	switch body[0] {
	case dirPut:
		op.kvs = r.kvs()
	case dirDeleteRange:
		op.start, op.end = r.bytes(), r.bytes() // non-nil unless r.err is set
	case dirClaim:
		kv := persist.KV{Key: r.bytes(), Value: r.bytes()}
		by := Claimer{Agent: string(r.bytes()), First: r.uvarint()}
		op.claim = &claimed{kv: kv, by: by, until: time.Unix(0, int64(r.uvarint()))}
	default:
		return bad(fmt.Sprintf("op %d", body[0]))
	}
	switch {
	case r.err != "":
		return bad(r.err)
	case len(r.buf) != 0:
		return bad("trailing bytes")
	}
	return op, nil
}
