package jslog

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/internal/jstest"
	"github.com/plaudit/plaudit/persist"
)

// startJetStream starts a real nats-server with JetStream.
func startJetStream(t *testing.T) jetstream.JetStream { return jetStream(t, jstest.Server(t)) }

func jetStream(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func openLog(t *testing.T, js jetstream.JetStream, p int, epoch uint64) *Log {
	t.Helper()
	l, err := Open(context.Background(), js, p, Config{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Fence(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	return l
}

// openReplicated opens and fences partition 0's log with the given
// replicas, waiting for a new cluster to elect the stream's leader.
func openReplicated(t *testing.T, js jetstream.JetStream, replicas int, epoch uint64) *Log {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		l, err := Open(ctx, js, 0, Config{Replicas: replicas})
		if err == nil {
			err = l.Fence(ctx, epoch)
		}
		cancel()
		if err == nil {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("an R%d log at epoch %d: %v", replicas, epoch, err)
		}
		time.Sleep(200 * time.Millisecond) // the cluster elects its leaders
	}
}

func batch(agent string, first uint64, events ...string) persist.Batch {
	b := persist.Batch{Agent: agent, First: first}
	for _, e := range events {
		b.Events = append(b.Events, []byte(e))
	}
	return b
}

func mustAppend(t *testing.T, l *Log, b persist.Batch) {
	t.Helper()
	if _, err := l.Append(context.Background(), b); err != nil {
		t.Fatalf("Append %s@%d: %v", b.Agent, b.First, err)
	}
}

func tail(t *testing.T, l *Log, agent string, after uint64) ([]persist.Batch, uint64) {
	t.Helper()
	ss, err := l.Tail(context.Background(), agent, after)
	if err != nil {
		t.Fatalf("Tail %s after %d: %v", agent, after, err)
	}
	var bs []persist.Batch
	last := after
	for _, s := range ss {
		bs = append(bs, s.Batch)
		last = s.Seq
	}
	return bs, last
}

func TestAnAgentsTailHoldsItsBatchesInOrderAndNoOtherAgents(t *testing.T) {
	js := startJetStream(t)
	l := openLog(t, js, 3, 1)
	withIndex := batch("agt_a", 1, "e1", "")
	withIndex.Index = []persist.KV{{Key: []byte("run/r1"), Value: []byte("agt_a")}, {Key: []byte("gone")},
		{Key: []byte("empty"), Value: []byte{}}}
	mustAppend(t, l, withIndex)
	mustAppend(t, l, batch("agt_b", 1, "b1"))
	mustAppend(t, l, batch("agt_a", 3, "e3"))
	mustAppend(t, l, batch("agt_a-2", 1, "other agent, a longer id"))

	got, last := tail(t, l, "agt_a", 0)
	want := []persist.Batch{withIndex, batch("agt_a", 3, "e3")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("tail of agt_a:\n got %+v\nwant %+v", got, want)
	}
	// After the first batch's stream sequence, only the second.
	rest, last2 := tail(t, l, "agt_a", last-2)
	if len(rest) != 1 || rest[0].First != 3 || last2 != last {
		t.Errorf("tail after %d: %+v (last %d), want the batch at 3 (last %d)", last-2, rest, last2, last)
	}
	if none, at := tail(t, l, "agt_a", last); len(none) != 0 || at != last {
		t.Errorf("tail after the last: %+v at %d", none, at)
	}
	if none, at := tail(t, l, "agt_unknown", 0); len(none) != 0 || at != 0 {
		t.Errorf("tail of an agent with no writes: %+v at %d", none, at)
	}
}

func TestANewOwnersFenceFailsEveryLaterAppendOfTheOldOwner(t *testing.T) {
	js := startJetStream(t)
	old := openLog(t, js, 0, 1)
	mustAppend(t, old, batch("agt_a", 1, "acked by the old owner"))
	next := openLog(t, js, 0, 2)
	for i, b := range []persist.Batch{batch("agt_a", 2, "late"), batch("agt_z", 1, "late, another agent")} {
		if _, err := old.Append(context.Background(), b); !errors.Is(err, ErrFenced) {
			t.Fatalf("old owner's append %d after the new fence: %v, want ErrFenced", i, err)
		}
	}
	// The new owner reads what the old one acknowledged, and nothing else.
	got, _ := tail(t, next, "agt_a", 0)
	if len(got) != 1 || string(got[0].Events[0]) != "acked by the old owner" {
		t.Fatalf("new owner's tail: %+v", got)
	}
	if z, _ := tail(t, next, "agt_z", 0); len(z) != 0 {
		t.Fatalf("a refused append is in the log: %+v", z)
	}
	mustAppend(t, next, batch("agt_a", 2, "by the new owner"))
}

// TestAFencedLogTellsItsOwnerOnce: the first write that finds another
// writer's message calls Config.OnFenced; the later ones, refused as well,
// do not call it again.
func TestAFencedLogTellsItsOwnerOnce(t *testing.T) {
	js := startJetStream(t)
	told := make(chan struct{}, 4)
	old, err := Open(context.Background(), js, 0, Config{Replicas: 1, OnFenced: func() { told <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Fence(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, old, batch("agt_a", 1, "acked"))
	openLog(t, js, 0, 2)
	for i := range 3 {
		if _, err := old.Append(context.Background(), batch("agt_a", 2, "late")); !errors.Is(err, ErrFenced) {
			t.Fatalf("append %d after the new fence: %v, want ErrFenced", i, err)
		}
	}
	select {
	case <-told:
	case <-time.After(10 * time.Second):
		t.Fatal("OnFenced not called")
	}
	select {
	case <-told:
		t.Fatal("OnFenced called again")
	case <-time.After(200 * time.Millisecond):
	}
}

func TestAnOwnerDeposedBeforeItFencedCannotFence(t *testing.T) {
	js := startJetStream(t)
	openLog(t, js, 0, 5)
	late, err := Open(context.Background(), js, 0, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := late.Fence(context.Background(), 4); !errors.Is(err, ErrFenced) {
		t.Fatalf("fence of epoch 4 after 5: %v, want ErrFenced", err)
	}
	if _, err := late.Append(context.Background(), batch("agt_a", 1, "x")); err == nil {
		t.Fatal("a Log whose fence failed appended")
	}
}

func TestAnAppendRetriedAfterALostAckIsStoredOnce(t *testing.T) {
	js := startJetStream(t)
	l := openLog(t, js, 0, 1)
	before := l.last
	b := batch("agt_a", 1, "once")
	mustAppend(t, l, b)
	l.last = before // as if the ack never arrived: the caller retries
	mustAppend(t, l, b)
	mustAppend(t, l, batch("agt_a", 2, "next"))
	got, _ := tail(t, l, "agt_a", 0)
	if len(got) != 2 || got[0].First != 1 || got[1].First != 2 {
		t.Fatalf("tail: %+v, want the batches at 1 and 2 once each", got)
	}
	// A retry once a new owner has fenced: the batch was stored before the
	// fence (the new owner reads it), so the retry is answered; the next
	// write is not.
	next := openLog(t, js, 0, 2)
	l.last = before
	if _, err := l.Append(context.Background(), b); err != nil {
		t.Fatalf("retry of a batch stored before the fence: %v", err)
	}
	if _, err := l.Append(context.Background(), batch("agt_a", 3, "late")); !errors.Is(err, ErrFenced) {
		t.Fatalf("append after the fence: %v, want ErrFenced", err)
	}
	if got, _ := tail(t, next, "agt_a", 0); len(got) != 2 {
		t.Fatalf("new owner's tail: %+v, want the two batches stored before its fence", got)
	}
}

func TestAppendRefusesWhatTheLogCannotHold(t *testing.T) {
	js := startJetStream(t)
	unfenced, err := Open(context.Background(), js, 0, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unfenced.Append(context.Background(), batch("agt_a", 1, "x")); err == nil {
		t.Error("Append before Fence succeeded")
	}
	l := openLog(t, js, 1, 1)
	for _, b := range []persist.Batch{batch("", 1, "x"), batch("_fence", 1, "x"), batch("a.b", 1, "x"),
		batch("a>", 1, "x"), batch("agt_a", 0, "x"), batch("agt_a", 1)} {
		if _, err := l.Append(context.Background(), b); !errors.Is(err, persist.ErrInvalid) {
			t.Errorf("Append %q@%d with %d events: %v, want ErrInvalid", b.Agent, b.First, len(b.Events), err)
		}
	}
}

func TestValidAgentTakesSubjectTokensOfLettersDigitsDashAndUnderscore(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"agt_01JDZ8V1Q9M3K7X2W5T4R6N8P0", true},
		{"a", true}, {"z", true}, {"A", true}, {"Z", true}, {"0", true}, {"9", true},
		{"a-b", true}, {"a_b", true}, {"-", true},
		{"", false}, {"_a", false}, {"_fence", false},
		{"@", false}, {"[", false}, {"`", false}, {"{", false}, {"/", false}, {":", false},
		{"a.b", false}, {"a*", false}, {"a>", false}, {"a b", false}, {"é", false},
	} {
		if got := ValidAgent(tc.id); got != tc.want {
			t.Errorf("ValidAgent(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}

// Fencing again at the same epoch (an owner retrying its acquisition after
// a lost answer) succeeds, and fences the first Log off like any newer one.
func TestAFenceAtTheSameEpochTakesOver(t *testing.T) {
	js := startJetStream(t)
	first := openLog(t, js, 0, 7)
	second := openLog(t, js, 0, 7)
	if _, err := first.Append(context.Background(), batch("agt_a", 1, "x")); !errors.Is(err, ErrFenced) {
		t.Fatalf("the first Log after a second fence at its epoch: %v, want ErrFenced", err)
	}
	mustAppend(t, second, batch("agt_a", 1, "x"))
}

func TestFencingHoldsOnAReplicatedStream(t *testing.T) {
	js := jetStream(t, jstest.Cluster(t, 3))
	old := openReplicated(t, js, 3, 1)
	mustAppend(t, old, batch("agt_a", 1, "acked"))
	next := openReplicated(t, js, 3, 2)
	if _, err := old.Append(context.Background(), batch("agt_a", 2, "late")); !errors.Is(err, ErrFenced) {
		t.Fatalf("the old owner's append on an R3 stream: %v, want ErrFenced", err)
	}
	if got, _ := tail(t, next, "agt_a", 0); len(got) != 1 {
		t.Fatalf("the new owner reads %d batches, want the one acknowledged", len(got))
	}
}

// A partition's stream keeps message ids for LogDuplicates, and a stream
// made with JetStream's default of 2 minutes is brought down to it when
// opened. A write sent again once its ids are out of the window is still
// told for its own: refused as not the last write, it is found in the log.
func TestALogKeepsMessageIdsForItsWindowAndTellsItsOwnWritesAfterIt(t *testing.T) {
	nc := jstest.Server(t)
	js := jetStream(t, nc)
	ctx := context.Background()
	if _, err := Open(ctx, js, 0, Config{Duplicates: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{0, 1} { // 0 made as before, 1 new
		if _, err := Open(ctx, js, p, Config{}); err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(ctx, StreamName(p))
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Duplicates; got != LogDuplicates {
			t.Errorf("partition %d keeps message ids %v, want %v", p, got, LogDuplicates)
		}
	}

	const window = 200 * time.Millisecond
	l, err := Open(ctx, js, 2, Config{Duplicates: window})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Fence(ctx, 1); err != nil {
		t.Fatal(err)
	}
	b := batch("agt_1", 1, "e1", "e2")
	after := l.last
	seq, err := l.Append(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * window)
	// The same write again at the same place, as a try whose answer was
	// lost would be.
	w := &write{subject: l.prefix + b.Agent, id: batchID(b), body: encodeBatch(b), turn: make(chan bool, 1)}
	got, err := l.writeGroup(ctx, after, nil, []*write{w})
	if err != nil || got != after {
		t.Fatalf("the write sent again after the window: at %d, %v; want its own, after %d (stored at %d)", got, err, after, seq)
	}
	info, err := l.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.LastSeq != seq {
		t.Errorf("the stream's last message is %d, want %d: the write was stored twice", info.State.LastSeq, seq)
	}
}
