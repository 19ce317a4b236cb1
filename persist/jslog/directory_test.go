package jslog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/internal/jstest"
	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/pebblelog"
)

// dirNode is one node's directory: its own Pebble store, mirroring the
// cluster's directory stream.
func dirNode(t *testing.T, js jetstream.JetStream, path string) (*Directory, *pebblelog.Store) {
	t.Helper()
	local, err := pebblelog.Open(path, pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenDirectory(context.Background(), js, local, DirectoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return d, local
}

func TestAKeyWrittenOnOneNodeIsReadOnAnotherAtOnce(t *testing.T) {
	js := startJetStream(t)
	a, aLocal := dirNode(t, js, t.TempDir())
	defer func() { a.Close(); _ = aLocal.Close() }()
	bPath := t.TempDir()
	b, bLocal := dirNode(t, js, bPath)
	for i := range 50 {
		key := binary.BigEndian.AppendUint32([]byte("run/"), uint32(i))
		if err := a.Put(persist.KV{Key: key, Value: []byte("agt_1")}); err != nil {
			t.Fatal(err)
		}
		// A miss on b waits for b's mirror to reach the stream's end.
		if v, err := b.Get(key); err != nil || string(v) != "agt_1" {
			t.Fatalf("write %d: b reads %q, %v", i, v, err)
		}
	}
	// b restarts while a writes: it resumes from where its mirror was.
	b.Close()
	if err := bLocal.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(persist.KV{Key: []byte("ws/late"), Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteRange([]byte("run/"), []byte("run0")); err != nil {
		t.Fatal(err)
	}
	b, bLocal = dirNode(t, js, bPath)
	defer func() { b.Close(); _ = bLocal.Close() }()
	if v, err := b.Get([]byte("ws/late")); err != nil || string(v) != "1" {
		t.Fatalf("after b's restart: %q, %v", v, err)
	}
	var keys []string
	if err := b.Scan(nil, func(k, _ []byte) error { keys = append(keys, string(k)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "ws/late" {
		t.Fatalf("b's directory after the range delete: %q, want only ws/late (and no mirror position)", keys)
	}
}

func TestTheMirrorsOwnKeysAreOutOfReach(t *testing.T) {
	js := startJetStream(t)
	d, local := dirNode(t, js, t.TempDir())
	defer func() { d.Close(); _ = local.Close() }()
	if err := d.Put(persist.KV{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(persist.KV{Key: appliedKey, Value: []byte("x")}); !errors.Is(err, persist.ErrInvalid) {
		t.Errorf("Put of the mirror's position: %v, want ErrInvalid", err)
	}
	if _, err := d.Get(appliedKey); !errors.Is(err, persist.ErrNotFound) {
		t.Errorf("Get of the mirror's position: %v, want ErrNotFound", err)
	}
	// A range that holds only the mirror's keys deletes nothing, and
	// reaches no mirror (an empty range would stop them all).
	if err := d.DeleteRange(reservedPrefix, []byte("\xff\xff")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get([]byte("k")); err != nil {
		t.Fatalf("a range delete of the mirror's keys alone took k: %v", err)
	}
	if err := d.DeleteRange([]byte("a"), []byte("\xff\xff")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get([]byte("k")); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("k after a range delete over everything: %v, want it gone", err)
	}
	if v, err := local.Get(appliedKey); err != nil || len(v) != 8 {
		t.Fatalf("a range delete over everything took the mirror's position: %q, %v", v, err)
	}
	if err := d.Put(persist.KV{Key: []byte("after"), Value: []byte("1")}); err != nil {
		t.Fatalf("a put after those range deletes: %v", err)
	}
}

// FuzzDecodeDirOp: no directory write body panics the decoder, and what it
// accepts encodes back to the same bytes.
func FuzzDecodeDirOp(f *testing.F) {
	body := func(op dirOp) []byte { rec := encodeDirOp(op); return rec[:len(rec)-4] }
	f.Add(body(dirOp{kvs: []persist.KV{{Key: []byte("k"), Value: []byte("v")}, {Key: []byte("gone")}}}))
	f.Add(body(dirOp{start: []byte("a/"), end: []byte("a0")}))
	f.Add([]byte{dirDeleteRange, 0, 0})
	f.Add(body(dirOp{claim: &claimed{kv: persist.KV{Key: []byte("runext/default/x"), Value: []byte("run_1")},
		until: time.Unix(1796170503, 0)}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec := binary.BigEndian.AppendUint32(bytes.Clone(data), crc32.Checksum(data, castagnoli))
		op, err := decodeDirOp(rec)
		if err != nil {
			if !errors.Is(err, persist.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if again := encodeDirOp(op); !bytes.Equal(again, rec) {
			t.Fatalf("accepted %x, which encodes back as %x", rec, again)
		}
	})
}

func TestOnApplySeesEveryNodesPutsOnceStored(t *testing.T) {
	js := startJetStream(t)
	a, aLocal := dirNode(t, js, t.TempDir())
	defer func() { a.Close(); _ = aLocal.Close() }()
	b, bLocal := dirNode(t, js, t.TempDir())
	defer func() { b.Close(); _ = bLocal.Close() }()
	seen := make(chan string, 10)
	b.OnApply(func(kvs []persist.KV) {
		for _, kv := range kvs {
			// Stored before fn runs: a reader called from fn finds it.
			if v, err := bLocal.Get(kv.Key); err != nil || !bytes.Equal(v, kv.Value) {
				t.Errorf("%s seen before it was stored: %q, %v", kv.Key, v, err)
			}
			seen <- string(kv.Key)
		}
	})
	if err := a.Put(persist.KV{Key: []byte("tenancy/ws/x"), Value: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteRange([]byte("a"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(persist.KV{Key: []byte("own"), Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if got := []string{<-seen, <-seen}; got[0] != "tenancy/ws/x" || got[1] != "own" {
		t.Fatalf("OnApply saw %q, want a's put then b's own", got)
	}
}

// poisonedLocal is a node's store whose directory refuses to store the key
// "poison", as a full or failing disk would refuse a write.
type poisonedLocal struct{ Local }

var errPoison = errors.New("the disk refused the write")

func (p poisonedLocal) PutUnsynced(kvs ...persist.KV) error {
	for _, kv := range kvs {
		if string(kv.Key) == "poison" {
			return errPoison
		}
	}
	return p.Local.PutUnsynced(kvs...)
}

func (p poisonedLocal) DeleteRangeUnsynced(start, end []byte) error {
	if string(start) == "poison" {
		return errPoison
	}
	return p.Local.DeleteRangeUnsynced(start, end)
}

// A write the mirror cannot apply stops it: applying the ones after would
// leave this node's copy without that write for good. Nor is it shown to
// OnApply.
func TestAMirrorThatCannotApplyAWriteStops(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(d *Directory) error
	}{
		{"a put", func(d *Directory) error { return d.Put(persist.KV{Key: []byte("poison"), Value: []byte("x")}) }},
		{"a range delete", func(d *Directory) error { return d.DeleteRange([]byte("poison"), []byte("poisoo")) }},
	} {
		t.Run(tc.name, func(t *testing.T) { testMirrorStops(t, tc.write) })
	}
}

func testMirrorStops(t *testing.T, poison func(d *Directory) error) {
	js := startJetStream(t)
	local, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = local.Close() }()
	d, err := OpenDirectory(context.Background(), js, poisonedLocal{local}, DirectoryConfig{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var shown atomic.Int32
	d.OnApply(func([]persist.KV) { shown.Add(1) })
	if err := poison(d); !errors.Is(err, errPoison) {
		t.Fatalf("the write the mirror could not apply: %v, want its error", err)
	}
	if n := shown.Load(); n != 0 {
		t.Fatalf("OnApply was shown %d writes the mirror could not apply", n)
	}
	if err := d.Put(persist.KV{Key: []byte("after"), Value: []byte("y")}); err == nil {
		t.Fatal("a write after the one the mirror could not apply was applied")
	}
	// The mirror receives "after" within milliseconds; it must not store it.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := local.Get([]byte("after")); !errors.Is(err, persist.ErrNotFound) {
			t.Fatalf("the mirror went on past a write it could not apply: %v", err)
		}
	}
}

// An invalid range delete is refused before it reaches the stream, where
// it would stop every node's mirror.
func TestAnInvalidRangeDeleteNeverReachesTheStream(t *testing.T) {
	js := startJetStream(t)
	d, local := dirNode(t, js, t.TempDir())
	defer func() { d.Close(); _ = local.Close() }()
	for _, r := range [][2]string{{"", "z"}, {"b", "a"}, {"a", "a"}} {
		if err := d.DeleteRange([]byte(r[0]), []byte(r[1])); !errors.Is(err, persist.ErrInvalid) {
			t.Fatalf("DeleteRange(%q, %q): %v, want ErrInvalid", r[0], r[1], err)
		}
	}
	if err := d.Put(persist.KV{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatalf("a put after the refused range deletes: %v", err)
	}
}

// Three nodes claiming the same external ids at the same moment, on a
// replicated directory: each key goes to exactly one of them, and every
// node's mirror reads that one's value.
func TestAUniqueKeyClaimedOnSeveralNodesAtOnceGoesToOne(t *testing.T) {
	js := jetStream(t, jstest.Cluster(t, 3))
	var dirs []*Directory
	for range 3 {
		var d *Directory
		for deadline := time.Now().Add(30 * time.Second); ; {
			local, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			d, err = OpenDirectory(ctx, js, local, DirectoryConfig{Replicas: 3})
			cancel()
			if err == nil {
				t.Cleanup(func() { d.Close(); _ = local.Close() })
				break
			}
			_ = local.Close()
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
		}
		dirs = append(dirs, d)
	}
	for i := range 20 {
		key := []byte(fmt.Sprintf("agentext/default/customer-%d", i))
		errs, claims := make([]error, len(dirs)), make([]Claim, len(dirs))
		var wg sync.WaitGroup
		for n, d := range dirs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				claims[n], errs[n] = d.Claim(persist.KV{Key: key, Value: []byte(fmt.Sprint("agt_", n)), Unique: true}, Claimer{})
			}()
		}
		wg.Wait()
		winner := -1
		for n, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("key %d claimed by nodes %d and %d", i, winner, n)
			case err == nil:
				winner = n
			case !errors.Is(err, persist.ErrExists):
				t.Fatalf("key %d, node %d: %v, want ErrExists or success", i, n, err)
			}
		}
		if winner < 0 {
			t.Fatalf("key %d claimed by none: %v", i, errs)
		}
		if err := dirs[winner].Confirm(claims[winner]); err != nil {
			t.Fatalf("key %d, node %d's confirmation: %v", i, winner, err)
		}
		for n, d := range dirs {
			if v, err := d.Get(key); err != nil || string(v) != fmt.Sprint("agt_", winner) {
				t.Fatalf("key %d on node %d: %q, %v; want node %d's", i, n, v, err, winner)
			}
		}
	}
}

// A batch whose unique key another node holds writes nothing: neither its
// other index entries nor its events.
func TestABatchWhoseUniqueKeyIsTakenWritesNothing(t *testing.T) {
	s := nodeStore(t, startJetStream(t))
	defer func() { _ = s.Close() }()
	taken := persist.KV{Key: []byte("runext/default/order-1"), Value: []byte("run_1"), Unique: true}
	if err := s.Append(persist.Batch{Agent: "agt_a", First: 1, Events: [][]byte{[]byte("e1")},
		Index: []persist.KV{{Key: []byte("run/run_1"), Value: []byte("agt_a")}, taken}}); err != nil {
		t.Fatal(err)
	}
	err := s.Append(persist.Batch{Agent: "agt_b", First: 1, Events: [][]byte{[]byte("e1")},
		Index: []persist.KV{{Key: []byte("run/run_2"), Value: []byte("agt_b")},
			{Key: taken.Key, Value: []byte("run_2"), Unique: true}}})
	if !errors.Is(err, persist.ErrExists) {
		t.Fatalf("the second claim of %s: %v, want ErrExists", taken.Key, err)
	}
	if v, err := s.Get(taken.Key); err != nil || string(v) != "run_1" {
		t.Errorf("%s: %q, %v; want the first claim's run_1", taken.Key, v, err)
	}
	if _, err := s.Get([]byte("run/run_2")); !errors.Is(err, persist.ErrNotFound) {
		t.Errorf("the refused batch's other index entry: %v, want not found", err)
	}
	if r, err := s.Load("agt_b"); err != nil || len(r.Tail) != 0 {
		t.Errorf("the refused batch's agent: %d events, %v; want none", len(r.Tail), err)
	}
}

// A batch retried while its keys are held by claims of failed writes whose
// windows end at different times (their log appends unanswered) gets
// through once the last has passed: each try that finds one key free and
// another held releases the one it took, rather than holding it against
// the next try.
func TestARetryGetsThroughKeysFreedAtDifferentTimes(t *testing.T) {
	lost := &lostJS{JetStream: startJetStream(t)}
	var c clock
	deposed := clockedStore(t, lost, &c, 1)
	owner := clockedStore(t, lost, &c, 2) // fences every partition: the first node is deposed
	key := func(name, value string) persist.KV {
		return persist.KV{Key: []byte("runext/default/" + name), Value: []byte(value), Unique: true}
	}
	failed := func(name string) {
		t.Helper()
		lost.lose(dropped, dropped) // the append, then the fence that would settle it
		if err := deposed.Append(persist.Batch{Agent: "agt_a", First: 1, Events: [][]byte{[]byte("e1")},
			Index: []persist.KV{key(name, "run_a")}}); err == nil || errors.Is(err, persist.ErrExists) {
			t.Fatalf("a deposed node's append claiming %s: %v; want a failed append", name, err)
		}
	}
	failed("k1") // held until 60s
	c.advance(30 * time.Second)
	failed("k2") // held until 90s
	for try := range 12 {
		c.advance(10 * time.Second) // tries at 40s, 50s, …, 150s
		run := fmt.Sprintf("run_b%d", try)
		err := owner.Append(persist.Batch{Agent: "agt_b", First: 1, Events: [][]byte{[]byte("e1")},
			Index: []persist.KV{key("k1", run), key("k2", run)}})
		switch {
		case err == nil:
			if at := 40 + 10*try; at < 90 {
				t.Fatalf("the try at %ds got through, inside k2's window", at)
			}
			for _, k := range []string{"k1", "k2"} {
				if v, err := owner.Get([]byte("runext/default/" + k)); err != nil || string(v) != run {
					t.Errorf("%s reads %q, %v; want %s", k, v, err, run)
				}
			}
			return
		case !errors.Is(err, persist.ErrExists):
			t.Fatalf("try %d: %v", try, err)
		}
	}
	t.Fatal("no try got through in a minute past the last window")
}

// A directory stream made before claims had subjects of their own gets
// them when a node opens it, and keeps what it held.
func TestADirectoryFromBeforeClaimsTakesThem(t *testing.T) {
	js := startJetStream(t)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: DirStream,
		Subjects: []string{dirSubject}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), dirSubject,
		encodeDirOp(dirOp{kvs: []persist.KV{{Key: []byte("ws/old"), Value: []byte("1")}}})); err != nil {
		t.Fatal(err)
	}
	// JetStream not answering in time: an error, not a half-opened stream.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := OpenDirectory(gone, js, nil, DirectoryConfig{}); err == nil {
		t.Fatal("OpenDirectory with a cancelled context: no error")
	}
	d, local := dirNode(t, js, t.TempDir())
	defer func() { d.Close(); _ = local.Close() }()
	c, err := d.Claim(persist.KV{Key: []byte("agentext/default/x"), Value: []byte("agt_1")}, Claimer{})
	if err == nil {
		err = d.Confirm(c)
	}
	if err != nil {
		t.Fatalf("a claim on the upgraded directory: %v", err)
	}
	for key, want := range map[string]string{"ws/old": "1", "agentext/default/x": "agt_1"} {
		if v, err := d.Get([]byte(key)); err != nil || string(v) != want {
			t.Errorf("%s: %q, %v; want %q", key, v, err, want)
		}
	}
}

func TestAClaimThatCannotBeAKeysFirstWriteIsRefused(t *testing.T) {
	js := startJetStream(t)
	d, local := dirNode(t, js, t.TempDir())
	defer func() { d.Close(); _ = local.Close() }()
	for name, kv := range map[string]persist.KV{
		"no key":               {Value: []byte("v")},
		"a deletion":           {Key: []byte("agentext/default/x")},
		"the mirror's own key": {Key: append(bytes.Clone(reservedPrefix), 'k'), Value: []byte("v")},
	} {
		if _, err := d.Claim(kv, Claimer{}); !errors.Is(err, persist.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// clockedStore is a node's Store whose claims, of a minute's window, run
// on c, its agents' logs fenced at epoch.
func clockedStore(t *testing.T, js jetstream.JetStream, c *clock, epoch uint64) *Store {
	t.Helper()
	local, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := OpenDirectory(context.Background(), js, local, DirectoryConfig{ClaimWindow: time.Minute, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(node(t, js, epoch), dir, local)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// clockedDirectory is a node's Directory over its own Pebble store,
// configured by cfg (its claims' clock among it), closed with the test.
func clockedDirectory(t *testing.T, js jetstream.JetStream, cfg DirectoryConfig) *Directory {
	t.Helper()
	local, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenDirectory(context.Background(), js, local, cfg)
	if err != nil {
		_ = local.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); _ = local.Close() })
	return d
}

// clock is a test's clock for claims, moved on by hand.
type clock struct{ ahead atomic.Int64 }

func (c *clock) now() time.Time           { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *clock) advance(by time.Duration) { c.ahead.Add(int64(by)) }

// A write that claimed an external id and then failed with its outcome
// unknown (its log append unanswered, and in fact never stored) leaves
// nothing a reader finds, neither the id nor its other index entries (an
// Idempotency-Key record among them, whose replay would acknowledge a
// write that never happened); a retry within the claim's window is
// refused, and once the window has passed another write takes the id, on
// any node.
func TestAnIDWhoseWriteFailedAfterItsClaimIsFreedAfterTheWindow(t *testing.T) {
	lost := &lostJS{JetStream: startJetStream(t)}
	var c clock
	store := func(epoch uint64) *Store { return clockedStore(t, lost, &c, epoch) }
	batch := func(agent, run string) persist.Batch {
		return persist.Batch{Agent: agent, First: 1, Events: [][]byte{[]byte("e1")}, Index: []persist.KV{
			{Key: []byte("run/" + run), Value: []byte(agent)},
			{Key: []byte("runext/default/order-1"), Value: []byte(run), Unique: true},
			{Key: []byte("idem/r/default/" + run), Value: []byte("201 " + run)}}}
	}
	deposed := store(1)
	lost.lose(dropped, dropped) // the append, then the fence that would settle it
	if err := deposed.Append(batch("agt_a", "run_1")); err == nil {
		t.Fatal("an unanswered append succeeded")
	}
	owner := store(2) // fences every partition: the first node is deposed
	for name, s := range map[string]*Store{"the deposed node": deposed, "the owner": owner} {
		for _, key := range []string{"runext/default/order-1", "run/run_1", "idem/r/default/run_1"} {
			if v, err := s.Get([]byte(key)); !errors.Is(err, persist.ErrNotFound) {
				t.Errorf("%s reads the failed write's %s: %q, %v; want not found", name, key, v, err)
			}
		}
	}
	c.advance(59 * time.Second)
	if err := owner.Append(batch("agt_b", "run_2")); !errors.Is(err, persist.ErrExists) {
		t.Fatalf("a claim inside the failed one's window: %v, want ErrExists", err)
	}
	c.advance(2 * time.Second)
	if err := owner.Append(batch("agt_b", "run_2")); err != nil {
		t.Fatalf("a claim past the failed one's window: %v", err)
	}
	for name, s := range map[string]*Store{"the deposed node": deposed, "the owner": owner} {
		if v, err := s.Get([]byte("runext/default/order-1")); err != nil || string(v) != "run_2" {
			t.Errorf("%s reads the id as %q, %v; want run_2", name, v, err)
		}
	}
	// Confirmed, the id is held for good.
	c.advance(time.Hour)
	if err := owner.Append(persist.Batch{Agent: "agt_b", First: 2, Events: [][]byte{[]byte("e2")}, Index: []persist.KV{
		{Key: []byte("runext/default/order-1"), Value: []byte("run_3"), Unique: true}}}); !errors.Is(err, persist.ErrExists) {
		t.Fatalf("a claim of a confirmed id: %v, want ErrExists", err)
	}
}

// A claim taken over after its window cannot be confirmed, and the one
// that took it over can: the key holds one write.
func TestAClaimTakenOverCannotBeConfirmed(t *testing.T) {
	js := startJetStream(t)
	var c clock
	d := clockedDirectory(t, js, DirectoryConfig{ClaimWindow: time.Minute, Now: c.now})
	key := []byte("agentext/default/x")
	slow, err := d.Claim(persist.KV{Key: key, Value: []byte("agt_1")}, Claimer{})
	if err != nil {
		t.Fatal(err)
	}
	c.advance(61 * time.Second)
	next, err := d.Claim(persist.KV{Key: key, Value: []byte("agt_2")}, Claimer{})
	if err != nil {
		t.Fatalf("a claim past the first one's window: %v", err)
	}
	if err := d.Confirm(slow); !errors.Is(err, persist.ErrExists) {
		t.Fatalf("the first claim's confirmation after the takeover: %v, want ErrExists", err)
	}
	if err := d.Confirm(next); err != nil {
		t.Fatalf("the second claim's confirmation: %v", err)
	}
	if v, err := d.Get(key); err != nil || string(v) != "agt_2" {
		t.Fatalf("%s: %q, %v; want agt_2", key, v, err)
	}
}

// A claim made before claims were confirmed (a put on the claim's
// subject) holds its key as a confirmed one does.
func TestAClaimFromBeforeConfirmationsStillHoldsItsKey(t *testing.T) {
	js := startJetStream(t)
	var c clock
	d := clockedDirectory(t, js, DirectoryConfig{Now: c.now})
	key := []byte("runext/default/old")
	if _, err := js.Publish(context.Background(), claimSubject(key),
		encodeDirOp(dirOp{kvs: []persist.KV{{Key: key, Value: []byte("run_old")}}})); err != nil {
		t.Fatal(err)
	}
	c.advance(24 * time.Hour)
	if _, err := d.Claim(persist.KV{Key: key, Value: []byte("run_new")}, Claimer{}); !errors.Is(err, persist.ErrExists) {
		t.Fatalf("a claim of a key an old-style claim holds: %v, want ErrExists", err)
	}
	if v, err := d.Get(key); err != nil || string(v) != "run_old" {
		t.Fatalf("%s: %q, %v; want run_old", key, v, err)
	}
}

// A batch the log took whose index never reached the directory (its node
// crashed after the log append, or the log's acknowledgement was lost)
// gets it when its agent is loaded, on any node: its entries written and
// its claims confirmed without waiting for the window. Past the window,
// another batch's claim of one of its keys finds it in the log and
// restores it rather than take the key.
func TestLoadingAnAgentConfirmsTheClaimsOfItsLoggedBatches(t *testing.T) {
	js := startJetStream(t)
	var c clock
	store := func(epoch uint64) *Store { return clockedStore(t, js, &c, epoch) }
	crashed := store(1)
	// What Append does up to a crash right after the log took the batches:
	// the claims, and the batch (its index entries with it, among them an
	// Idempotency-Key record), not yet the directory's other entries.
	logged := func(agent, run, ext string) {
		t.Helper()
		id := persist.KV{Key: []byte("runext/default/" + ext), Value: []byte(run), Unique: true}
		if _, err := crashed.dir.Claim(id, Claimer{Agent: agent, First: 1}); err != nil {
			t.Fatal(err)
		}
		if err := crashed.agents.Append(persist.Batch{Agent: agent, First: 1, Events: [][]byte{[]byte("e1")},
			Index: []persist.KV{{Key: []byte("run/" + run), Value: []byte(agent)}, id,
				{Key: []byte("idem/r/default/" + ext), Value: []byte("201 " + run)}}}); err != nil {
			t.Fatal(err)
		}
	}
	logged("agt_a", "run_1", "order-1")
	logged("agt_b", "run_2", "order-2")
	if _, err := crashed.Get([]byte("runext/default/order-1")); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("an unconfirmed claim is read: %v, want not found", err)
	}
	// Past the window, another batch claims order-2 before agt_b loads
	// (a retry of a keyed write that names no agent makes a new one): the
	// logged batch keeps it, and its index is restored then and there,
	// its Idempotency-Key record among it, which the retry then replays.
	c.advance(2 * time.Minute)
	err := crashed.Append(persist.Batch{Agent: "agt_c", First: 1, Events: [][]byte{[]byte("e1")},
		Index: []persist.KV{{Key: []byte("runext/default/order-2"), Value: []byte("run_9"), Unique: true}}})
	if !errors.Is(err, persist.ErrExists) {
		t.Fatalf("another batch's claim of a logged batch's id past its window: %v, want ErrExists", err)
	}
	if v, err := crashed.Get([]byte("idem/r/default/order-2")); err != nil || string(v) != "201 run_2" {
		t.Fatalf("the logged batch's record after the refused claim: %q, %v; want 201 run_2", v, err)
	}
	if r, err := crashed.Load("agt_c"); err != nil || len(r.Tail) != 0 {
		t.Fatalf("the refused batch's agent: %d events, %v; want none", len(r.Tail), err)
	}
	owner := store(2) // the next owner, which loads the agents from the log
	for agent, want := range map[string]string{"agt_a": "run_1", "agt_b": "run_2"} {
		if r, err := owner.Load(agent); err != nil || len(r.Tail) != 1 {
			t.Fatalf("load %s: %d events, %v", agent, len(r.Tail), err)
		}
		ext, run := map[string]string{"agt_a": "order-1", "agt_b": "order-2"}[agent], map[string]string{"agt_a": "run_1", "agt_b": "run_2"}[agent]
		for name, s := range map[string]*Store{"the crashed node": crashed, "the owner": owner} {
			for key, want := range map[string]string{"runext/default/" + ext: want, "run/" + run: agent, "idem/r/default/" + ext: "201 " + run} {
				if v, err := s.Get([]byte(key)); err != nil || string(v) != want {
					t.Errorf("after %s loaded, %s reads %s as %q, %v; want %s", agent, name, key, v, err, want)
				}
			}
		}
	}
}

// A logged batch whose index is restored while another write holds one of
// its unique keys unconfirmed (a claim whose answer was lost, made by a
// retry of the batch's request) gets its whole index once that claim's
// window passes, its Idempotency-Key record among it. Restoring the other
// keys alone, or restoring while the retry holds its own claims, left the
// record out for good: the retry's every try then made a new run, whose
// external id the restored batch held.
func TestALoggedBatchIsRestoredWholeOnceAWriteInFlightLetsGoOfItsKey(t *testing.T) {
	js := startJetStream(t)
	var c clock
	s := clockedStore(t, js, &c, 1)
	ext, rec := []byte("runext/default/order-1"), []byte("idem/r/default/k1")
	keys := func(run string) []persist.KV {
		return []persist.KV{{Key: ext, Value: []byte(run), Unique: true},
			{Key: rec, Value: []byte("201 " + run), Unique: true}}
	}
	// The first try: claims, then the log append; no confirmation.
	first := keys("run_1")
	var claimed []Claim
	for _, kv := range first {
		cl, err := s.dir.Claim(kv, Claimer{Agent: "agt_a", First: 1})
		if err != nil {
			t.Fatal(err)
		}
		claimed = append(claimed, cl)
	}
	if err := s.agents.Append(persist.Batch{Agent: "agt_a", First: 1, Events: [][]byte{[]byte("e1")},
		Index: first}); err != nil {
		t.Fatal(err)
	}
	// Past the window, a retry's claim of the record lands, its answer
	// lost (it read the log while the batch was not there yet).
	c.advance(2 * time.Minute)
	if _, err := s.dir.TakeOver(keys("run_2")[1], Claimer{Agent: "agt_a", First: 2}, claimed[1].seq); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("agt_a"); err == nil {
		t.Fatal("the agent loaded while a write in flight held its logged batch's key")
	}
	if v, err := s.Get(ext); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("the failed restore confirmed the external id: %q, %v", v, err)
	}
	// Retries of the request, each past the window of the claims before.
	retry := func(run string) error {
		return s.Append(persist.Batch{Agent: "agt_a", First: 2, Events: [][]byte{[]byte("e2")}, Index: keys(run)})
	}
	for i, run := range []string{"run_3", "run_4"} {
		c.advance(2 * time.Minute)
		if err := retry(run); !errors.Is(err, persist.ErrExists) {
			t.Fatalf("retry %d: %v, want ErrExists", i, err)
		}
	}
	for _, kv := range first {
		if v, err := s.Get(kv.Key); err != nil || !bytes.Equal(v, kv.Value) {
			t.Errorf("%s after the retries: %q, %v; want %s", kv.Key, v, err, kv.Value)
		}
	}
	if _, err := s.Load("agt_a"); err != nil {
		t.Fatalf("load after the restore: %v", err)
	}
}

// Two logged batches that hold one unique key (the second took the first's
// claim over on a read of the log that missed the first): the restore of
// the one whose claim was taken over restores the other's index, whose
// claim the key holds, and leaves the key to it.
func TestARestoreMeetingAnotherLoggedBatchsClaimRestoresThatBatch(t *testing.T) {
	js := startJetStream(t)
	var c clock
	s := clockedStore(t, js, &c, 1)
	id := []byte("agentext/default/acme")
	logged := func(agent, value string, claim func(kv persist.KV, by Claimer) (Claim, error)) {
		t.Helper()
		kv := persist.KV{Key: id, Value: []byte(value), Unique: true}
		if _, err := claim(kv, Claimer{Agent: agent, First: 1}); err != nil {
			t.Fatal(err)
		}
		if err := s.agents.Append(persist.Batch{Agent: agent, First: 1, Events: [][]byte{[]byte("e1")},
			Index: []persist.KV{kv, {Key: []byte("idem/r/default/" + agent), Value: []byte("201 " + value)}}}); err != nil {
			t.Fatal(err)
		}
	}
	logged("agt_a", "agt_x", s.dir.Claim)
	c.advance(2 * time.Minute)
	logged("agt_b", "agt_y", func(kv persist.KV, by Claimer) (Claim, error) {
		var stale *StaleClaim
		if _, err := s.dir.Claim(kv, by); !errors.As(err, &stale) {
			t.Fatalf("a claim past the window: %v, want a stale claim", err)
		}
		return s.dir.TakeOver(kv, by, stale.seq)
	})
	c.advance(2 * time.Minute)
	if _, err := s.Load("agt_a"); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{string(id): "agt_y", "idem/r/default/agt_b": "201 agt_y",
		"idem/r/default/agt_a": "201 agt_x"} { // the rest of the first batch's index too
		if v, err := s.Get([]byte(key)); err != nil || string(v) != want {
			t.Errorf("%s: %q, %v; want %s", key, v, err, want)
		}
	}
}

// A batch whose partition this node does not own (a paused node's queued
// request, once its lease has gone) sends nothing to the log; one fenced
// off by the new owner, or whose append went unanswered and was settled as
// not stored, is not stored. Each releases its claims at once, and the
// owner's batch takes the keys without waiting out a window.
func TestABatchOfAPartitionNotOwnedHereReleasesItsClaims(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disown  bool // the deposed owner has given the partition up
		lose    bool // its append goes unanswered, and is not stored
		wantErr error
	}{
		{"given up", true, false, ErrNotOwner},
		{"fenced off by the new owner", false, false, ErrFenced},
		{"unanswered, not stored", false, true, ErrNotStored},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost := &lostJS{JetStream: startJetStream(t)}
			var c clock
			deposed := clockedStore(t, lost, &c, 1)
			var owner *Store
			if !tc.lose {
				owner = clockedStore(t, lost, &c, 2)
			}
			batch := func(run string) persist.Batch {
				return persist.Batch{Agent: "agt_a", First: 1, Events: [][]byte{[]byte("e1")}, Index: []persist.KV{
					{Key: []byte("runext/default/order-1"), Value: []byte(run), Unique: true},
					{Key: []byte("idem/r/default/k1"), Value: []byte("201 " + run), Unique: true}}}
			}
			if tc.disown {
				deposed.agents.Disown(partitionOf("agt_a"))
			}
			if tc.lose {
				lost.lose(dropped)
			}
			if err := deposed.Append(batch("run_1")); !errors.Is(err, tc.wantErr) {
				t.Fatalf("the first append: %v, want %v", err, tc.wantErr)
			}
			if tc.lose {
				owner = deposed // its node goes on serving the agent
			}
			if err := owner.Append(batch("run_2")); err != nil {
				t.Fatalf("the owner's batch claiming the same keys: %v", err)
			}
			if v, err := owner.Get([]byte("runext/default/order-1")); err != nil || string(v) != "run_2" {
				t.Fatalf("the external id: %q, %v; want run_2", v, err)
			}
		})
	}
}

// A confirmed key deleted since (an Idempotency-Key record past its time)
// may be claimed again; one still held may not.
func TestADeletedKeyCanBeClaimedAgain(t *testing.T) {
	js := startJetStream(t)
	d, local := dirNode(t, js, t.TempDir())
	defer func() { d.Close(); _ = local.Close() }()
	key := []byte("idem/r/default/scope/key-1")
	claim := func(value string) error {
		c, err := d.Claim(persist.KV{Key: key, Value: []byte(value)}, Claimer{})
		if err == nil {
			err = d.Confirm(c)
		}
		return err
	}
	if err := claim("first"); err != nil {
		t.Fatal(err)
	}
	if err := claim("second"); !errors.Is(err, persist.ErrExists) {
		t.Fatalf("a claim of a held key: %v, want ErrExists", err)
	}
	if err := d.Put(persist.KV{Key: key}); err != nil {
		t.Fatal(err)
	}
	if err := claim("second"); err != nil {
		t.Fatalf("a claim of the key once deleted: %v", err)
	}
	if v, err := d.Get(key); err != nil || string(v) != "second" {
		t.Fatalf("%s: %q, %v; want second", key, v, err)
	}
}

// A stale claim's batch is found in the log only by the claimed entry
// itself: a batch at the claim's place that holds the same value under
// another key, or the same key with another value, is another write.
func TestAStaleClaimIsMatchedToItsBatchByItsEntry(t *testing.T) {
	js := startJetStream(t)
	a := node(t, js, 1)
	id := persist.KV{Key: []byte("agentext/default/acme"), Value: []byte("agt_x"), Unique: true}
	for agent, kv := range map[string]persist.KV{
		"agt_a": {Key: []byte("agent/default/agt_x"), Value: id.Value}, // the value under another key
		"agt_b": {Key: id.Key, Value: []byte("agt_other")},             // the key with another value
		"agt_c": id,                                                    // the entry
	} {
		if err := a.Append(persist.Batch{Agent: agent, First: 1, Events: [][]byte{[]byte("e1")},
			Index: []persist.KV{kv}}); err != nil {
			t.Fatal(err)
		}
		_, ok, err := a.logged(agent, 1, id)
		if want := agent == "agt_c"; ok != want || err != nil {
			t.Errorf("%s's batch holding %s → %s: logged %v, %v; want %v", agent, kv.Key, kv.Value, ok, err, want)
		}
	}
}

// Without a ClaimWindow, a claim holds its key for six Timeouts when that
// is longer than a minute.
func TestTheDefaultClaimWindowIsSixTimeouts(t *testing.T) {
	js := startJetStream(t)
	var c clock
	d := clockedDirectory(t, js, DirectoryConfig{Timeout: 20 * time.Second, Now: c.now})
	key := []byte("agentext/default/x")
	if _, err := d.Claim(persist.KV{Key: key, Value: []byte("agt_1")}, Claimer{}); err != nil {
		t.Fatal(err)
	}
	c.advance(2*time.Minute - time.Second)
	if _, err := d.Claim(persist.KV{Key: key, Value: []byte("agt_2")}, Claimer{}); !errors.Is(err, persist.ErrExists) {
		t.Fatalf("a claim a second inside the window of six 20 s timeouts: %v, want ErrExists", err)
	}
	c.advance(2 * time.Second)
	if _, err := d.Claim(persist.KV{Key: key, Value: []byte("agt_2")}, Claimer{}); err != nil {
		t.Fatalf("a claim a second past that window: %v", err)
	}
}

// The mirror does not sync its writes: a power cut loses the last ones,
// and their position with them, so the node's copy goes on from before
// them and applies them again. Nothing a write was acknowledged for is
// missing once the restarted node reads it.
func TestAMirrorThatLostItsUnsyncedTailInACrashAppliesItAgain(t *testing.T) {
	js := startJetStream(t)
	a := clockedDirectory(t, js, DirectoryConfig{})
	fs := vfs.NewCrashableMem()
	local, err := pebblelog.Open("b", pebblelog.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenDirectory(context.Background(), js, local, DirectoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) []byte { return fmt.Appendf(nil, "run/%03d", i) }
	for i := range 40 {
		if err := a.Put(persist.KV{Key: key(i), Value: []byte("agt_1")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.DeleteRange(key(0), key(10)); err != nil {
		t.Fatal(err)
	}
	if err := b.CatchUp(); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	b.Close()
	_ = local.Close()

	local, err = pebblelog.Open("b", pebblelog.Options{FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = local.Close() }()
	if _, err := local.Get(key(39)); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("the last mirrored write survived the crash (%v): the mirror synced it, and this test shows nothing", err)
	}
	b, err = OpenDirectory(context.Background(), js, local, DirectoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := range 40 {
		v, err := b.Get(key(i))
		switch {
		case i < 10 && !errors.Is(err, persist.ErrNotFound):
			t.Errorf("key %d, deleted before the crash: %q, %v", i, v, err)
		case i >= 10 && (err != nil || string(v) != "agt_1"):
			t.Errorf("key %d after the crash: %q, %v", i, v, err)
		}
	}
}

// heldInfoStream answers its first Info as the stream was when asked, but
// only once released: a query of the stream's end that was sent before a
// write and comes back after it.
type heldInfoStream struct {
	jetstream.Stream
	calls   atomic.Int32
	asked   chan struct{}
	release chan struct{}
}

func (s *heldInfoStream) Info(ctx context.Context, opts ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error) {
	info, err := s.Stream.Info(ctx, opts...)
	if s.calls.Add(1) == 1 {
		close(s.asked)
		<-s.release
	}
	return info, err
}

// A CatchUp that comes while a query of the stream's end is out does not
// take that query's answer, which may be from before a write the CatchUp
// must see: it waits for the next query, which it shares with every other
// CatchUp that came meanwhile.
func TestACatchUpDoesNotShareAQuerySentBeforeIt(t *testing.T) {
	js := startJetStream(t)
	a := clockedDirectory(t, js, DirectoryConfig{})
	b := clockedDirectory(t, js, DirectoryConfig{})
	held := &heldInfoStream{Stream: b.stream, asked: make(chan struct{}), release: make(chan struct{})}
	b.stream = held
	first := make(chan error, 1)
	go func() { first <- b.CatchUp() }()
	<-held.asked // the first query has read the stream's end
	if err := a.Put(persist.KV{Key: []byte("run/late"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	want, err := a.stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		seq uint64
		err error
	}
	later := make(chan answer, 8)
	for range 8 {
		go func() {
			seq, err := b.end(context.Background())
			later <- answer{seq, err}
		}()
	}
	time.Sleep(50 * time.Millisecond) // the eight wait for the next query
	close(held.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range 8 {
		got := <-later
		if got.err != nil || got.seq < want.State.LastSeq {
			t.Fatalf("a CatchUp begun after a write took the stream's end as %d (%v); the write is at %d", got.seq, got.err, want.State.LastSeq)
		}
	}
	if n := held.calls.Load(); n != 2 {
		t.Errorf("%d queries of the stream's end for one CatchUp and eight that came during its query, want 2", n)
	}
}

// A node's store is up to date once its directory is open: the writes made
// while the node was down (a key revoked among them) are in it before
// anything reads it, the tenancy's load included, which reads the store
// itself, not the directory.
func TestADirectoryOpensWithItsCopyCaughtUp(t *testing.T) {
	js := startJetStream(t)
	a := clockedDirectory(t, js, DirectoryConfig{})
	bPath := t.TempDir()
	b, bLocal := dirNode(t, js, bPath)
	if err := a.Put(persist.KV{Key: []byte("key/revoked"), Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := b.CatchUp(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	_ = bLocal.Close()
	kvs := []persist.KV{{Key: []byte("key/revoked")}}
	for i := range 200 {
		kvs = append(kvs, persist.KV{Key: fmt.Appendf(nil, "key/%03d", i), Value: []byte("v")})
	}
	for _, kv := range kvs {
		if err := a.Put(kv); err != nil {
			t.Fatal(err)
		}
	}
	b, bLocal = dirNode(t, js, bPath)
	defer func() { b.Close(); _ = bLocal.Close() }()
	var keys []string
	if err := bLocal.Scan([]byte("key/"), func(k, _ []byte) error { keys = append(keys, string(k)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 200 || keys[0] != "key/000" || keys[199] != "key/199" {
		t.Fatalf("b's store once its directory is open holds %d keys (%.3q…), want the 200 written while it was down and not the revoked one", len(keys), keys)
	}
}

// Loading an agent writes what its last logged batch's index lacks in the
// directory: past a deletion in it, and never over an entry the directory
// holds (a later write's).
func TestLoadingAnAgentRestoresOnlyWhatItsLastBatchsIndexLacks(t *testing.T) {
	js := startJetStream(t)
	var c clock
	crashed := clockedStore(t, js, &c, 1)
	if err := crashed.Put(persist.KV{Key: []byte("run/run_1"), Value: []byte("later")}); err != nil {
		t.Fatal(err)
	}
	// The batch reached the log, not the directory (its node crashed).
	if err := crashed.agents.Append(persist.Batch{Agent: "agt_a", First: 1, Events: [][]byte{[]byte("e1")},
		Index: []persist.KV{{Key: []byte("gone/x")}, {Key: []byte("run/run_1"), Value: []byte("agt_a")},
			{Key: []byte("run/run_2"), Value: []byte("agt_a")}}}); err != nil {
		t.Fatal(err)
	}
	owner := clockedStore(t, js, &c, 2)
	if _, err := owner.Load("agt_a"); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"run/run_1": "later", "run/run_2": "agt_a"} {
		if v, err := owner.Get([]byte(key)); err != nil || string(v) != want {
			t.Errorf("after the load, %s reads %q, %v; want %q", key, v, err, want)
		}
	}
}

// A batch's unique keys are claimed and confirmed together: all of them
// readable once it is written; none of its index if one is taken.
func TestABatchOfSeveralUniqueKeysWritesAllOrNone(t *testing.T) {
	js := startJetStream(t)
	var c clock
	s := clockedStore(t, js, &c, 1)
	ids := func(agent string, names ...string) []persist.KV {
		var kvs []persist.KV
		for _, n := range names {
			kvs = append(kvs, persist.KV{Key: []byte("runext/default/" + n), Value: []byte(agent), Unique: true})
		}
		return append(kvs, persist.KV{Key: []byte("run/of/" + agent), Value: []byte(agent)})
	}
	if err := s.Append(persist.Batch{Agent: "agt_a", First: 1, Events: [][]byte{[]byte("e1")},
		Index: ids("agt_a", "a1", "a2", "a3", "a4")}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a1", "a2", "a3", "a4"} {
		if v, err := s.Get([]byte("runext/default/" + n)); err != nil || string(v) != "agt_a" {
			t.Errorf("%s after its batch: %q, %v", n, v, err)
		}
	}
	err := s.Append(persist.Batch{Agent: "agt_b", First: 1, Events: [][]byte{[]byte("e1")},
		Index: ids("agt_b", "b1", "b2", "a3", "b4")})
	if !errors.Is(err, persist.ErrExists) {
		t.Fatalf("a batch with a taken id among four: %v, want ErrExists", err)
	}
	for _, key := range []string{"runext/default/b1", "runext/default/b2", "runext/default/b4", "run/of/agt_b"} {
		if v, err := s.Get([]byte(key)); !errors.Is(err, persist.ErrNotFound) {
			t.Errorf("%s of the refused batch: %q, %v; want not found", key, v, err)
		}
	}
	if r, err := s.Load("agt_b"); err != nil || len(r.Tail) != 0 {
		t.Errorf("the refused batch's agent: %d events, %v; want none", len(r.Tail), err)
	}
	// Its other keys were released, not left to their window: another
	// write takes them at once.
	if err := s.Append(persist.Batch{Agent: "agt_c", First: 1, Events: [][]byte{[]byte("e1")},
		Index: ids("agt_c", "b1", "b2", "b4")}); err != nil {
		t.Fatalf("the refused batch's other ids, claimed again at once: %v", err)
	}
}

// heldLocal is a node's store whose mirror writes, once hold is set, wait
// until release is closed: the node's copy of the directory stays behind
// the stream.
type heldLocal struct {
	*pebblelog.Store
	hold    atomic.Bool
	release chan struct{}
}

func (h *heldLocal) PutUnsynced(kvs ...persist.KV) error {
	if h.hold.Load() {
		<-h.release
	}
	return h.Store.PutUnsynced(kvs...)
}

// CatchUp returns once this node's copy holds every write the stream had
// when it was called, not before: a key written on another node is then
// in this node's store.
func TestACatchUpWaitsUntilTheCopyHoldsTheStreamsWrites(t *testing.T) {
	js := startJetStream(t)
	a := clockedDirectory(t, js, DirectoryConfig{})
	store, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	local := &heldLocal{Store: store, release: make(chan struct{})}
	b, err := OpenDirectory(context.Background(), js, local, DirectoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	local.hold.Store(true)
	if err := a.Put(persist.KV{Key: []byte("run/late"), Value: []byte("agt_1")}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.CatchUp() }()
	select {
	case err := <-done:
		t.Fatalf("CatchUp returned (%v) while the copy still lacked a write", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(local.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, err := store.Get([]byte("run/late")); err != nil || string(v) != "agt_1" {
		t.Fatalf("after CatchUp the node's store reads %q, %v", v, err)
	}
}

// inFlightJS is JetStream whose leader, for the next refuse writes on
// claims' subjects, answers as a replicated stream's does while another
// write on the subject is in flight: "wrong last sequence", no sequence.
type inFlightJS struct {
	jetstream.JetStream
	refuse atomic.Int32
}

func (j *inFlightJS) Publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if strings.HasPrefix(subject, dirSubject+".claim.") && j.refuse.Add(-1) >= 0 {
		return nil, &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant,
			Description: "wrong last sequence"}
	}
	return j.JetStream.Publish(ctx, subject, data, opts...)
}

// A claim, a confirmation or a release refused for a write in flight on
// its subject (a replicated stream's leader refuses one for a moment even
// after the claimer's own claim is acknowledged) is sent again: the
// refusal does not say the key is taken.
func TestAClaimRefusedForAWriteInFlightIsSentAgain(t *testing.T) {
	js := &inFlightJS{JetStream: startJetStream(t)}
	d := clockedDirectory(t, js, DirectoryConfig{})
	kv := persist.KV{Key: []byte("runext/default/order-1"), Value: []byte("run_1"), Unique: true}
	js.refuse.Store(3)
	c, err := d.Claim(kv, Claimer{Agent: "agt_a", First: 1})
	if err != nil {
		t.Fatalf("a claim refused 3 times for a write in flight: %v", err)
	}
	js.refuse.Store(3)
	if err := d.Confirm(c); err != nil {
		t.Fatalf("its confirmation, refused 3 times for a write in flight: %v", err)
	}
	if v, err := d.Get(kv.Key); err != nil || string(v) != "run_1" {
		t.Fatalf("the key reads %q, %v; want run_1", v, err)
	}
	// A release refused so is sent again too: the key is free at once.
	other := persist.KV{Key: []byte("runext/default/order-2"), Value: []byte("run_2"), Unique: true}
	c, err = d.Claim(other, Claimer{Agent: "agt_a", First: 2})
	if err != nil {
		t.Fatal(err)
	}
	js.refuse.Store(3)
	d.Release(c)
	if _, err := d.Claim(persist.KV{Key: other.Key, Value: []byte("run_3"), Unique: true}, Claimer{Agent: "agt_b", First: 1}); err != nil {
		t.Fatalf("a claim of a key released after 3 refusals: %v", err)
	}
}

// A batch whose append went unanswered but was stored, settled at once,
// succeeds: its claims are confirmed, and its keys read as any other's.
func TestAnUnansweredBatchFoundStoredHasItsKeys(t *testing.T) {
	lost := &lostJS{JetStream: startJetStream(t)}
	var c clock
	s := clockedStore(t, lost, &c, 1)
	lost.lose(stored)
	if err := s.Append(persist.Batch{Agent: "agt_a", First: 1, Events: [][]byte{[]byte("e1")}, Index: []persist.KV{
		{Key: []byte("runext/default/order-1"), Value: []byte("run_1"), Unique: true}}}); err != nil {
		t.Fatalf("an append unanswered but stored: %v", err)
	}
	if v, err := s.Get([]byte("runext/default/order-1")); err != nil || string(v) != "run_1" {
		t.Fatalf("the external id: %q, %v; want run_1", v, err)
	}
}

// A directory write whose answer does not come within a try is sent again
// within its timeout, under the same message id: one a stream's leader
// dropped as it stepped down is then stored, and one stored whose answer
// was lost is answered as its duplicate, not stored twice. Puts, claims
// and confirmations alike; sent once for the whole timeout, each failed
// at its end.
// A stream of three copies answers a stored write's duplicate as such; one
// of one copy refuses it for its expected last sequence first.
func TestADirectoryWriteWhoseAnswerDoesNotComeIsSentAgain(t *testing.T) {
	clustered := jetStream(t, jstest.Cluster(t, 3))
	for _, tc := range []struct {
		name     string
		f        fate
		replicas int
	}{{"dropped", dropped, 1}, {"stored, its answer lost", stored, 1}, {"stored, its answer lost, three copies", stored, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			js := startJetStream(t)
			if tc.replicas == 3 {
				js = clustered
			}
			lost := &lostJS{JetStream: js, silent: true, prefix: dirSubject}
			local, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = local.Close() }()
			var d *Directory
			for deadline := time.Now().Add(30 * time.Second); ; {
				// A new cluster's stream may wait for its leader.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				d, err = OpenDirectory(ctx, lost, local, DirectoryConfig{Timeout: 10 * time.Second, Replicas: tc.replicas})
				cancel()
				if err == nil || time.Now().After(deadline) {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()

			lost.lose(tc.f)
			if err := d.Put(persist.KV{Key: []byte("run/1"), Value: []byte("agt_1")}); err != nil {
				t.Fatalf("a put unanswered at its first try: %v", err)
			}
			lost.lose(tc.f)
			c, err := d.Claim(persist.KV{Key: []byte("ext/job-1"), Value: []byte("run_1")}, Claimer{})
			if err != nil {
				t.Fatalf("a claim unanswered at its first try: %v", err)
			}
			lost.lose(tc.f)
			if err := d.Confirm(c); err != nil {
				t.Fatalf("a confirmation unanswered at its first try: %v", err)
			}
			for key, want := range map[string]string{"run/1": "agt_1", "ext/job-1": "run_1"} {
				if v, err := d.Get([]byte(key)); err != nil || string(v) != want {
					t.Errorf("%s reads %q, %v; want %q", key, v, err, want)
				}
			}
			info, err := d.stream.Info(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Msgs != 3 {
				t.Errorf("the directory holds %d writes, want 3: a put, a claim, a confirmation, each once", info.State.Msgs)
			}
		})
	}
}

// mirrorAway opens a Directory of three copies on a cluster of three
// servers whose mirror's consumer is on a server other than the one the
// test talks to and JetStream's meta leader (whose leadership a client of
// an account cannot move), and stops that server once the stream's
// leadership has moved off it: only the mirror is lost with it. It
// returns the directory, its local store, and a connection to a server
// that stays up.
func mirrorAway(t *testing.T) (*Directory, *pebblelog.Store, *nats.Conn) {
	t.Helper()
	servers := jstest.Servers(t, 3)
	nc := connect(t, servers[0].ClientURL())
	js := jetStream(t, nc)
	local, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	ctx := context.Background()
	open := func() *Directory {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			d, err := OpenDirectory(ctx, js, local, DirectoryConfig{Replicas: 3, Timeout: 8 * time.Second})
			cancel()
			if err == nil {
				return d
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
		}
	}
	// JetStream places the consumer: the mirror is made again until it is
	// where it must be.
	var d *Directory
	var host string
	victim := -1
	for range 20 {
		if d != nil {
			d.Close()
		}
		d = open()
		var newest time.Time
		for c := range d.stream.ListConsumers(ctx).Info() {
			if c.Created.After(newest) {
				host, newest = c.Cluster.Leader, c.Created
			}
		}
		victim = slices.IndexFunc(servers, func(s *server.Server) bool { return s.Name() == host })
		if victim > 0 && !servers[victim].JetStreamIsLeader() {
			break
		}
		victim = -1
	}
	t.Cleanup(d.Close)
	if victim <= 0 {
		t.Fatalf("the mirror's consumer is on %q in 20 tries: want a server other than the test's and the meta leader", host)
	}
	if err := d.Put(persist.KV{Key: []byte("run/1"), Value: []byte("agt_1")}); err != nil {
		t.Fatal(err)
	}
	led := func() bool {
		info, err := d.stream.Info(ctx)
		return err != nil || info.Cluster.Leader == host || info.Cluster.Leader == ""
	}
	for deadline := time.Now().Add(30 * time.Second); led(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still led by %s", DirStream, host)
		}
		_, _ = nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+DirStream, nil, time.Second)
	}
	servers[victim].Shutdown()
	return d, local, nc
}

// The directory's mirror is a consumer of one copy, on a server of
// JetStream's choosing. When that server stops, a write waiting for the
// mirror makes it afresh once it has not moved for mirrorStall, and goes
// on: every directory write returns once its node's mirror has applied
// it. Left to nats.go, the mirror stood still for 10 s (two missed 5 s
// heartbeats), and a write's 8 s wait failed.
func TestAMirrorWhoseServerStopsIsMadeAfresh(t *testing.T) {
	d, _, _ := mirrorAway(t)
	if err := d.Put(persist.KV{Key: []byte("run/2"), Value: []byte("agt_1")}); err != nil {
		t.Fatalf("a put after the mirror's server stopped: %v", err)
	}
}

// A node nothing waits on makes its mirror afresh too: another node's
// write reaches its store within seconds of its mirror's server stopping.
// Left to nats.go, its reads were served from the mirror as it stood for
// 10 s or more (a key revoked meanwhile still honoured).
func TestAMirrorNothingWaitsOnIsMadeAfresh(t *testing.T) {
	_, local, nc := mirrorAway(t)
	// Another node's write, straight to the stream.
	js := jetStream(t, nc)
	data := encodeDirOp(dirOp{kvs: []persist.KV{{Key: []byte("run/2"), Value: []byte("agt_2")}}})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if _, err := inTries(ctx, sendTry, func(try context.Context) (*jetstream.PubAck, error) {
		return js.Publish(try, dirSubject, data)
	}); err != nil {
		t.Fatal(err)
	}
	for {
		if v, err := local.Get([]byte("run/2")); err == nil {
			if string(v) != "agt_2" {
				t.Fatalf("run/2 is %q in the mirror, want agt_2", v)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatal("another node's write is not in this node's store 8 s after it was made: the mirror stood still")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
