package jslog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/internal/jstest"
	"github.com/plaudit/plaudit/persist"
)

// appendAll appends rounds batches for each of agents at once, each agent's
// in order as an actor makes them, and returns the errors by agent; the
// stream sequence each append returned is in seqs, by agent, in order.
func appendAll(l *Log, agents []string, rounds int) (errs map[string]error, seqs map[string][]uint64) {
	var mu sync.Mutex
	errs, seqs = map[string]error{}, map[string][]uint64{}
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Go(func() {
			for i := range rounds {
				seq, err := l.Append(context.Background(), batch(a, uint64(i+1), fmt.Sprintf("%s-%d", a, i+1)))
				mu.Lock()
				if err != nil {
					errs[a] = err
				} else {
					seqs[a] = append(seqs[a], seq)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return errs, seqs
}

func TestWritesMadeTogetherAreStoredOnceEachInTheirAgentsOrderAndGoOutInGroups(t *testing.T) {
	for _, servers := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", servers), func(t *testing.T) {
			js := jetStream(t, jstest.Cluster(t, servers))
			l := openReplicated(t, js, servers, 1)
			var agents []string
			for i := range 32 {
				agents = append(agents, fmt.Sprintf("agt_%d", i))
			}
			const rounds = 10
			errs, seqs := appendAll(l, agents, rounds)
			if len(errs) > 0 {
				t.Fatalf("appends failed: %v", errs)
			}
			for _, a := range agents {
				got, err := l.Tail(context.Background(), a, 0)
				if err != nil || len(got) != rounds {
					t.Fatalf("%s: %d batches, %v; want %d", a, len(got), err, rounds)
				}
				for i, b := range got {
					if b.First != uint64(i+1) || string(b.Events[0]) != fmt.Sprintf("%s-%d", a, i+1) {
						t.Fatalf("%s: batch %d is %+v", a, i, b)
					}
					// Each append answered where the stream holds it, in a
					// group or alone (a snapshot trims the log by these).
					if b.Seq != seqs[a][i] {
						t.Errorf("%s: batch %d is stored at %d; its append answered %d", a, i, b.Seq, seqs[a][i])
					}
				}
			}
			// Every message is a write or the fence, and some went in groups.
			info, err := l.stream.Info(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if want := uint64(len(agents)*rounds + 1); info.State.Msgs != want || info.State.LastSeq != want {
				t.Fatalf("the stream holds %d messages up to %d, want %d", info.State.Msgs, info.State.LastSeq, want)
			}
			grouped := 0
			for seq := uint64(2); seq <= info.State.LastSeq; seq++ {
				m, err := l.stream.GetMsg(context.Background(), seq)
				if err != nil {
					t.Fatal(err)
				}
				if m.Header.Get(batchIDHeader) != "" {
					grouped++
				}
			}
			if grouped == 0 {
				t.Fatal("32 agents appending at once: no write went in a group")
			}
			t.Logf("%d of %d writes went in groups", grouped, len(agents)*rounds)
		})
	}
}

// A deposed owner with writes of many agents out and queued: once the new
// owner has fenced, every one of them fails, every write it acknowledged
// is in the log the new owner reads, once and in order, and nothing of it
// follows the fence (the log has not forked).
func TestADeposedOwnersGroupsAllFailOnceANewOwnerFences(t *testing.T) {
	for _, servers := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", servers), func(t *testing.T) {
			urls := jstest.ClusterURLs(t, servers)
			old := openReplicated(t, jetStream(t, connect(t, urls[0])), servers, 1)
			var mu sync.Mutex
			acked := map[string]uint64{} // agent → its last acknowledged batch
			var agents []string
			for i := range 32 {
				agents = append(agents, fmt.Sprintf("agt_%d", i))
			}
			started := make(chan struct{}, len(agents))
			var wg sync.WaitGroup
			errs := make(chan error, len(agents))
			for _, a := range agents {
				wg.Go(func() {
					for i := uint64(1); ; i++ {
						if _, err := old.Append(context.Background(), batch(a, i, fmt.Sprintf("%s-%d", a, i))); err != nil {
							errs <- err
							return
						}
						mu.Lock()
						acked[a] = i
						mu.Unlock()
						if i == 3 {
							started <- struct{}{}
						}
					}
				})
			}
			for range agents {
				<-started
			}
			next := openReplicated(t, jetStream(t, connect(t, urls[servers-1])), servers, 2)
			fence := next.last
			wg.Wait()
			close(errs)
			for err := range errs {
				if !errors.Is(err, ErrFenced) {
					t.Errorf("the deposed owner's write failed with %v, want ErrFenced", err)
				}
			}
			info, err := next.stream.Info(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if info.State.LastSeq != fence {
				t.Fatalf("the log goes on to %d after the new owner's fence at %d", info.State.LastSeq, fence)
			}
			for _, a := range agents {
				got, _ := tail(t, next, a, 0)
				if uint64(len(got)) < acked[a] {
					t.Fatalf("%s: %d batches in the log, %d acknowledged", a, len(got), acked[a])
				}
				for i, b := range got {
					if b.First != uint64(i+1) {
						t.Fatalf("%s: batch %d starts at %d", a, i, b.First)
					}
				}
				mustAppend(t, next, batch(a, uint64(len(got)+1), "by the new owner"))
			}
		})
	}
}

// A group whose acknowledgement was lost, sent again, is recognised and
// stored once; a group of another writer's making at the same place is
// fenced off.
func TestAGroupRetriedAfterALostAckIsStoredOnce(t *testing.T) {
	js := startJetStream(t)
	l := openLog(t, js, 0, 1)
	group := func(agent string) []*write {
		var g []*write
		for i := range 3 {
			g = append(g, &write{subject: l.prefix + agent, id: fmt.Sprintf("%s:%d", agent, i+1),
				body: encodeBatch(batch(agent, uint64(i+1), "x"))})
		}
		return g
	}
	after := l.last
	if _, err := l.writeGroup(context.Background(), after, nil, group("agt_a")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.writeGroup(context.Background(), after, nil, group("agt_a")); err != nil {
		t.Fatalf("the same group again at the same place: %v", err)
	}
	if got, _ := tail(t, l, "agt_a", 0); len(got) != 3 {
		t.Fatalf("tail: %d batches, want the group's 3 once", len(got))
	}
	if _, err := l.writeGroup(context.Background(), after, nil, group("agt_b")); !errors.Is(err, ErrFenced) {
		t.Fatalf("another group expecting the same place: %v, want ErrFenced", err)
	}
	if got, _ := tail(t, l, "agt_b", 0); len(got) != 0 {
		t.Fatalf("a fenced group is in the log: %+v", got)
	}
}

// A group holding a message id the stream has stored before, elsewhere,
// is refused whole without fencing the Log.
func TestAGroupWithAnIDStoredBeforeWritesNothingAndDoesNotFence(t *testing.T) {
	js := startJetStream(t)
	l := openLog(t, js, 0, 1)
	mustAppend(t, l, batch("agt_a", 1, "first"))
	mustAppend(t, l, batch("agt_b", 1, "between"))
	g := []*write{
		{subject: l.prefix + "agt_c", id: "agt_c:1", body: encodeBatch(batch("agt_c", 1, "c"))},
		{subject: l.prefix + "agt_a", id: "agt_a:1", body: encodeBatch(batch("agt_a", 1, "again"))},
	}
	_, err := l.writeGroup(context.Background(), l.last, nil, g)
	if err == nil || errors.Is(err, ErrFenced) {
		t.Fatalf("a group with a stored id: %v, want an error other than ErrFenced", err)
	}
	if got, _ := tail(t, l, "agt_c", 0); len(got) != 0 {
		t.Fatalf("part of a refused group is in the log: %+v", got)
	}
	mustAppend(t, l, batch("agt_c", 1, "c"))
	var stored []persist.Batch
	for _, a := range []string{"agt_a", "agt_b", "agt_c"} {
		got, _ := tail(t, l, a, 0)
		stored = append(stored, got...)
	}
	if len(stored) != 3 {
		t.Fatalf("the log holds %d batches, want 3", len(stored))
	}
}

// A stream made before writes went in groups is given atomic batches when
// a Log opens it.
func TestAStreamOfAnEarlierVersionTakesGroups(t *testing.T) {
	js := startJetStream(t)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: StreamName(0),
		Subjects: []string{subjectPrefix(0) + ">"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, js, 0, 1)
	if !l.stream.CachedInfo().Config.AllowAtomicPublish {
		t.Fatal("the stream was not given atomic batches")
	}
	if errs, _ := appendAll(l, []string{"agt_a", "agt_b", "agt_c", "agt_d"}, 5); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func connect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// More writes queued than one group takes (maxGroup) go out in several
// groups, every one of them stored once.
func TestMoreWritesQueuedThanAGroupTakesAreAllStored(t *testing.T) {
	js := startJetStream(t)
	l := openLog(t, js, 0, 1)
	const agents = 3*maxGroup + 7
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make(chan error, agents)
	var wg sync.WaitGroup
	for i := range agents {
		wg.Go(func() {
			a := fmt.Sprintf("agt_%d", i)
			if _, err := l.Append(ctx, batch(a, 1, a)); err != nil {
				errs <- fmt.Errorf("%s: %w", a, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	info, err := l.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(agents + 1); info.State.Msgs != want {
		t.Fatalf("the stream holds %d messages, want %d: each write and the fence", info.State.Msgs, want)
	}
	for _, i := range []int{0, maxGroup, agents - 1} {
		a := fmt.Sprintf("agt_%d", i)
		if got, _ := tail(t, l, a, 0); len(got) != 1 || string(got[0].Events[0]) != a {
			t.Fatalf("%s: %+v, want its one write", a, got)
		}
	}
}

// A log that cannot be made (JetStream gone before the call) is an error.
func TestALogThatCannotBeOpenedIsAnError(t *testing.T) {
	js := startJetStream(t)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if l, err := Open(gone, js, 0, Config{}); err == nil {
		t.Fatalf("Open with JetStream out of reach: %v, nil error", l)
	}
}

// fate is what becomes of a write whose answer never comes.
type fate int

const (
	dropped fate = iota // it never reaches the stream
	stored              // stored at once
	late                // sent once the test releases it, as a leader that had it queued would
)

// lostJS is JetStream whose next writes to partition logs get no answer,
// as when a stream elects a new leader while they are out: each meets the
// fate given, and is reported as timed out.
type lostJS struct {
	jetstream.JetStream
	mu    sync.Mutex
	fates []fate
	held  []func() error
	// silent makes an unanswered write wait until its caller's context
	// ends, as one a stream's leader dropped does, rather than time out at
	// once as if that context had ended.
	silent bool
	// prefix names the subjects whose writes lose their answers
	// ("plaudit.log." when empty).
	prefix string
}

// lose gives the next writes to partition logs no answer, and these fates.
func (j *lostJS) lose(fates ...fate) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.fates = fates
}

// release sends the late writes and returns what the stream answered each.
func (j *lostJS) release() []error {
	j.mu.Lock()
	held := j.held
	j.held = nil
	j.mu.Unlock()
	var errs []error
	for _, send := range held {
		errs = append(errs, send())
	}
	return errs
}

func (j *lostJS) Publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	j.mu.Lock()
	prefix := cmp.Or(j.prefix, "plaudit.log.")
	if len(j.fates) == 0 || !strings.HasPrefix(subject, prefix) {
		j.mu.Unlock()
		return j.JetStream.Publish(ctx, subject, data, opts...)
	}
	f := j.fates[0]
	j.fates = j.fates[1:]
	send := func() error {
		_, err := j.JetStream.Publish(context.Background(), subject, data, opts...)
		return err
	}
	if f == late {
		j.held = append(j.held, send)
	}
	silent := j.silent
	j.mu.Unlock()
	if f == stored {
		if err := send(); err != nil {
			return nil, err
		}
	}
	if silent {
		<-ctx.Done()
		return nil, fmt.Errorf("publish: %w", ctx.Err())
	}
	return nil, fmt.Errorf("publish: %w", context.DeadlineExceeded)
}

// A write whose answer does not come within a try is sent again within its
// deadline: one that a stream's leader dropped as it stepped down (as the
// leaders on a stopping node's server do) is then stored, and one stored
// whose answer was lost is found stored, not stored twice. Sent once for
// the whole deadline, a dropped write held every write of its partition
// up for 10 s and then failed (docs/cluster.md, a node's clean stop).
func TestAWriteWhoseAnswerDoesNotComeIsSentAgainWithinItsDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    fate
	}{{"dropped", dropped}, {"stored, its answer lost", stored}} {
		t.Run(tc.name, func(t *testing.T) {
			lost := &lostJS{JetStream: startJetStream(t), silent: true}
			l := openLog(t, lost, 0, 1)
			mustAppend(t, l, batch("agt_a", 1, "answered"))
			lost.lose(tc.f)
			// The Agents' deadline: several tries' worth.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := l.Append(ctx, batch("agt_a", 2, "unanswered at first")); err != nil {
				t.Fatalf("a write unanswered at its first try: %v, want it stored", err)
			}
			mustAppend(t, l, batch("agt_a", 3, "after"))
			got, _ := tail(t, l, "agt_a", 0)
			if len(got) != 3 {
				t.Fatalf("the log holds %d batches of agt_a, want 3", len(got))
			}
			for i, b := range got {
				if b.First != uint64(i+1) {
					t.Fatalf("batch %d starts at %d", i, b.First)
				}
			}
		})
	}
}

// A write whose answer never came may have been stored, after the Log's
// last write: the next write finds it there and goes after it. Taken for
// another writer's, it fenced the Log for good, and the partition's owner
// could write no more.
func TestAWriteAfterUnansweredOnesGoesAfterTheOneStored(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fates []fate // of the unanswered writes, in turn
	}{
		{"stored", []fate{stored}},
		{"dropped", []fate{dropped}},
		{"the second of two stored", []fate{dropped, stored}},
		{"none of three stored", []fate{dropped, dropped, dropped}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost := &lostJS{JetStream: startJetStream(t)}
			l := openLog(t, lost, 0, 1)
			mustAppend(t, l, batch("agt_a", 1, "answered"))
			lost.lose(tc.fates...)
			for i := range tc.fates {
				_, err := l.Append(context.Background(), batch("agt_a", 2, fmt.Sprintf("unanswered %d", i)))
				if err == nil || errors.Is(err, ErrFenced) {
					t.Fatalf("unanswered write %d: %v, want a timeout", i, err)
				}
			}
			next := uint64(2)
			if slices.Contains(tc.fates, stored) {
				next = 3
			}
			for i := range 2 {
				mustAppend(t, l, batch("agt_a", next+uint64(i), "after"))
			}
			got, _ := tail(t, l, "agt_a", 0)
			if want := int(next) + 1; len(got) != want {
				t.Fatalf("the log holds %d batches, want %d", len(got), want)
			}
			for i, b := range got {
				if b.First != uint64(i+1) {
					t.Fatalf("batch %d starts at %d", i, b.First)
				}
			}
		})
	}
}

// An unanswered write not stored, with another writer's write in its
// place, still fences the Log.
func TestAWriteAfterAnUnansweredOneIsFencedByAnotherWritersWrite(t *testing.T) {
	lost := &lostJS{JetStream: startJetStream(t)}
	l := openLog(t, lost, 0, 1)
	mustAppend(t, l, batch("agt_a", 1, "answered"))
	lost.lose(dropped)
	if _, err := l.Append(context.Background(), batch("agt_a", 2, "unanswered")); err == nil {
		t.Fatal("the unanswered write succeeded")
	}
	openLog(t, lost.JetStream, 0, 2) // a new owner's fence
	if _, err := l.Append(context.Background(), batch("agt_a", 2, "after")); !errors.Is(err, ErrFenced) {
		t.Fatalf("a write after another owner's fence: %v, want ErrFenced", err)
	}
}

// An agent loaded after its append went unanswered sees that append if the
// log will ever hold it. One still queued at the stream's leader when the
// load reads is kept out for good: it expected the place the load's fence
// takes. Missed by the load and stored after it, it gave the agent's next
// batch the same event numbers (and its message id, which JetStream
// acknowledged as a duplicate without storing the batch).
func TestALoadAfterAnUnansweredAppendSeesAllTheLogWillHold(t *testing.T) {
	lost := &lostJS{JetStream: startJetStream(t)}
	a := node(t, lost, 1)
	appendEvents(t, a, "agt_a", 1, 1)
	lost.lose(late, dropped) // the append, then the fence that would settle it
	if err := a.Append(batch("agt_a", 2, "unanswered")); err == nil || errors.Is(err, ErrNotStored) {
		t.Fatalf("the unanswered append: %v, want its outcome unknown", err)
	}
	r, err := a.Load("agt_a")
	if err != nil || r.LastSeq != 1 {
		t.Fatalf("the load: last event %d, %v; want 1", r.LastSeq, err)
	}
	for _, err := range lost.release() {
		if err == nil {
			t.Fatal("the late append was stored after the load")
		}
	}
	if err := a.Append(batch("agt_a", 2, "after the load")); err != nil {
		t.Fatal(err)
	}
	r, err = a.Load("agt_a")
	if err != nil || r.LastSeq != 2 || len(r.Tail) != 2 || string(r.Tail[1]) != "after the load" {
		t.Fatalf("the load: last event %d, tail %q, %v; want the batch made after the first load", r.LastSeq, r.Tail, err)
	}
}

// An append that went unanswered is settled at once where it can be: the
// Log's place taken, the agent's last batch tells whether it is stored. An
// unknown outcome failed the agent's actor, and kept the keys its batch
// claimed for their window.
func TestAnUnansweredAppendIsSettledAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fates   []fate // of the append, then of the fence that settles it
		want    error  // nil: stored
		stored  bool
		unknown bool // the outcome stays unknown
	}{
		{"stored", []fate{stored}, nil, true, false},
		{"dropped", []fate{dropped}, ErrNotStored, false, false},
		{"late", []fate{late}, ErrNotStored, false, false},
		{"the settling unanswered too", []fate{dropped, dropped}, nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost := &lostJS{JetStream: startJetStream(t)}
			a := node(t, lost, 1)
			appendEvents(t, a, "agt_a", 1, 1)
			lost.lose(tc.fates...)
			err := a.Append(batch("agt_a", 2, "unanswered"))
			switch {
			case tc.unknown:
				if err == nil || errors.Is(err, ErrNotStored) {
					t.Fatalf("append: %v, want its outcome unknown", err)
				}
			case !errors.Is(err, tc.want):
				t.Fatalf("append: %v, want %v", err, tc.want)
			}
			for _, err := range lost.release() {
				if err == nil {
					t.Fatal("the late append was stored after it was settled")
				}
			}
			want := uint64(1)
			if tc.stored {
				want = 2
			}
			r, err := a.Load("agt_a")
			if err != nil || r.LastSeq != want {
				t.Fatalf("load: last event %d, %v; want %d", r.LastSeq, err, want)
			}
			appendEvents(t, a, "agt_a", r.LastSeq+1, 1)
		})
	}
}

// laggingJS is JetStream whose partition streams answer reads of hidden
// sequences as if they held nothing there yet, as a stream's new leader
// that has not applied a write it already counts does.
type laggingJS struct {
	jetstream.JetStream
	mu     sync.Mutex
	hidden map[uint64]bool
}

// hide makes reads of seqs find nothing, and only those.
func (j *laggingJS) hide(seqs ...uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.hidden = map[uint64]bool{}
	for _, s := range seqs {
		j.hidden[s] = true
	}
}

func (j *laggingJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	s, err := j.JetStream.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return laggingStream{s, j}, nil
}

func (j *laggingJS) CreateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := j.JetStream.CreateStream(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return laggingStream{s, j}, nil
}

type laggingStream struct {
	jetstream.Stream
	js *laggingJS
}

func (s laggingStream) GetMsg(ctx context.Context, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	s.js.mu.Lock()
	hidden := s.js.hidden[seq]
	s.js.mu.Unlock()
	if hidden {
		return nil, jetstream.ErrMsgNotFound
	}
	return s.Stream.GetMsg(ctx, seq, opts...)
}

// A write refused as not the last, with nothing readable yet where it was
// to go (the stream's leader still storing a write of the Log's that went
// unanswered), cannot tell whose write is there: it waits, up to its
// deadline, and the Log goes on once the write can be read. Taken for
// another writer's, it fenced the Log for good under a lease still held.
// Only a newer owner's fence in the log fences it then.
func TestAWriteBeforeItsPlaceIsReadableIsNotFencedButByANewerFence(t *testing.T) {
	for _, tc := range []struct {
		name     string
		newOwner bool
	}{
		{"the Log's own write", false},
		{"a newer owner's fence after it", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost := &lostJS{JetStream: startJetStream(t)}
			lag := &laggingJS{JetStream: lost}
			l := openLog(t, lag, 0, 1) // its fence at 1
			mustAppend(t, l, batch("agt_a", 1, "answered"))
			lost.lose(stored) // at 3, unanswered
			if _, err := l.Append(context.Background(), batch("agt_a", 2, "unanswered")); err == nil || errors.Is(err, ErrFenced) {
				t.Fatalf("the unanswered write: %v, want a timeout", err)
			}
			if tc.newOwner {
				openLog(t, lost.JetStream, 0, 2)
			}
			lag.hide(3)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := l.Append(ctx, batch("agt_b", 1, "refused"))
			if tc.newOwner {
				if !errors.Is(err, ErrFenced) {
					t.Fatalf("a write after a newer owner's fence: %v, want ErrFenced", err)
				}
				return
			}
			if err == nil || errors.Is(err, ErrFenced) {
				t.Fatalf("a write before its place is readable: %v, want an error that does not fence", err)
			}
			lag.hide()
			mustAppend(t, l, batch("agt_b", 1, "after"))
			if a, _ := tail(t, l, "agt_a", 0); len(a) != 2 {
				t.Fatalf("agt_a has %d batches in the log, want 2", len(a))
			}
		})
	}
}

// inTries sends again a try that ran out unanswered and one refused while
// an earlier try is being stored, and returns any other answer at once.
func TestInTries(t *testing.T) {
	inProcess := &jetstream.APIError{Code: 409, ErrorCode: 10158}
	refused := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}
	for _, tc := range []struct {
		name    string
		answers []error // one a try; context.DeadlineExceeded: the try runs out of its time
		want    error
		tries   int
	}{
		{"answered", []error{nil}, nil, 1},
		{"unanswered, then answered", []error{context.DeadlineExceeded, context.DeadlineExceeded, nil}, nil, 3},
		{"in process, then answered", []error{context.DeadlineExceeded, inProcess, inProcess, nil}, nil, 4},
		{"refused", []error{context.DeadlineExceeded, refused}, refused, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			_, err := inTries(context.Background(), 50*time.Millisecond, func(try context.Context) (struct{}, error) {
				a := tc.answers[tries]
				tries++
				if errors.Is(a, context.DeadlineExceeded) {
					<-try.Done()
					return struct{}{}, fmt.Errorf("publish: %w", try.Err())
				}
				return struct{}{}, a
			})
			if !errors.Is(err, tc.want) || tries != tc.tries {
				t.Errorf("inTries = %v after %d tries, want %v after %d", err, tries, tc.want, tc.tries)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Millisecond)
	defer cancel()
	if _, err := inTries(ctx, 50*time.Millisecond, func(try context.Context) (struct{}, error) {
		<-try.Done()
		return struct{}{}, try.Err()
	}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("never answered: %v, want the caller's deadline", err)
	}
}
