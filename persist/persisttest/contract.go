// Package persisttest is the contract every persist.Store implementation
// must pass. Implementations run it from their own tests:
//
//	func TestContract(t *testing.T) {
//		persisttest.RunContract(t, func(t *testing.T) persist.Store { ... })
//	}
package persisttest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"
	"testing"

	"github.com/plaudit/plaudit/persist"
)

// AgentLog is the agent half of persist.Store: what an agent actor writes
// and recovers.
type AgentLog interface {
	Append(b persist.Batch) error
	SaveSnapshot(agent string, seq uint64, state persist.State) error
	Load(agent string) (persist.Recovered, error)
}

// agentLogTests is the part of the contract an AgentLog must pass alone.
var agentLogTests = []struct {
	name string
	fn   func(t *testing.T, s AgentLog)
}{
	{"AppendLoadRoundTrip", testRoundTrip},
	{"MultipleBatches", testMultipleBatches},
	{"AppendCopiesCallerBuffers", testAppendCopies},
	{"SnapshotThenTail", testSnapshotThenTail},
	{"SnapshotAtLastSeq", testSnapshotAtLastSeq},
	{"SnapshotStateWrittenInPieces", testSnapshotInPieces},
	{"SnapshotStateErrorStoresNothing", testSnapshotStateError},
	{"StaleSnapshotIgnored", testStaleSnapshot},
	{"SameSeqSnapshotReplaces", testSameSeqSnapshot},
	{"LogEndsAtLargestSeq", testLastSeqAtMax},
	{"UnknownAgentIsZero", testUnknownAgent},
	{"AgentsAreIsolated", testAgentsIsolated},
	{"InvalidArguments", testInvalid},
	{"ConcurrentAgents", testConcurrentAgents},
}

// RunContract runs the contract as subtests. open must return a fresh, empty
// store; RunContract closes it when the subtest ends.
func RunContract(t *testing.T, open func(t *testing.T) persist.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s persist.Store)
	}{
		{"InvalidDirectoryArguments", testInvalidDirectory},
		{"Directory", testDirectory},
		{"DirectoryIsolatedFromLogs", testDirectoryIsolation},
		{"IndexCommittedWithEvents", testIndex},
		{"ScanStopsOnError", testScanError},
		{"DeleteRange", testDeleteRange},
		{"CloseThenErrClosed", testClose},
	}
	for _, tc := range agentLogTests {
		tests = append(tests, struct {
			name string
			fn   func(t *testing.T, s persist.Store)
		}{tc.name, func(t *testing.T, s persist.Store) { tc.fn(t, s) }})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { _ = s.Close() }) // ErrClosed if the test closed it
			tc.fn(t, s)
		})
	}
}

// RunAgentLogContract runs the agent half of the contract as subtests.
// open must return a fresh, empty AgentLog, and close it in t.Cleanup if
// it needs closing.
func RunAgentLogContract(t *testing.T, open func(t *testing.T) AgentLog) {
	for _, tc := range agentLogTests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// Events returns n distinct payloads for agent starting at seq first.
func Events(agent string, first uint64, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "%s#%d", agent, first+uint64(i))
	}
	return out
}

func mustAppend(t *testing.T, s AgentLog, agent string, first uint64, evs [][]byte) {
	t.Helper()
	if err := s.Append(persist.Batch{Agent: agent, First: first, Events: evs}); err != nil {
		t.Fatalf("Append(%s, %d): %v", agent, first, err)
	}
}

func mustLoad(t *testing.T, s AgentLog, agent string) persist.Recovered {
	t.Helper()
	r, err := s.Load(agent)
	if err != nil {
		t.Fatalf("Load(%s): %v", agent, err)
	}
	return r
}

// CheckTail fails t unless got holds exactly want, in order.
func CheckTail(t *testing.T, agent string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("agent %s: tail has %d events, want %d", agent, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("agent %s: tail[%d] = %q, want %q", agent, i, got[i], want[i])
		}
	}
}

func testRoundTrip(t *testing.T, s AgentLog) {
	evs := [][]byte{[]byte("one"), {}, bytes.Repeat([]byte{0xff}, 5000)}
	mustAppend(t, s, "agt_a", 1, evs)
	r := mustLoad(t, s, "agt_a")
	if r.Snapshot != nil || r.SnapshotSeq != 0 || r.LastSeq != 3 {
		t.Fatalf("Load = snapshot %v seq %d last %d, want nil 0 3", r.Snapshot, r.SnapshotSeq, r.LastSeq)
	}
	CheckTail(t, "agt_a", r.Tail, evs)
}

func testMultipleBatches(t *testing.T, s AgentLog) {
	var want [][]byte
	seq := uint64(1)
	for n := 1; n <= 5; n++ {
		evs := Events("agt_m", seq, n)
		mustAppend(t, s, "agt_m", seq, evs)
		want = append(want, evs...)
		seq += uint64(n)
	}
	r := mustLoad(t, s, "agt_m")
	CheckTail(t, "agt_m", r.Tail, want)
	if r.LastSeq != seq-1 {
		t.Fatalf("LastSeq = %d, want %d", r.LastSeq, seq-1)
	}
}

func testAppendCopies(t *testing.T, s AgentLog) {
	ev := []byte("original")
	mustAppend(t, s, "agt_c", 1, [][]byte{ev})
	copy(ev, "mutated!")
	r := mustLoad(t, s, "agt_c")
	CheckTail(t, "agt_c", r.Tail, [][]byte{[]byte("original")})
	r.Tail[0][0] = 'X'
	CheckTail(t, "agt_c", mustLoad(t, s, "agt_c").Tail, [][]byte{[]byte("original")})
}

func testSnapshotThenTail(t *testing.T, s AgentLog) {
	all := Events("agt_s", 1, 10)
	mustAppend(t, s, "agt_s", 1, all[:4])
	mustAppend(t, s, "agt_s", 5, all[4:])
	state := bytes.Repeat([]byte("state-6 "), 1000)
	if err := s.SaveSnapshot("agt_s", 6, persist.Bytes(state)); err != nil {
		t.Fatalf("SaveSnapshot: %v", err)
	}
	more := Events("agt_s", 11, 2)
	mustAppend(t, s, "agt_s", 11, more)
	r := mustLoad(t, s, "agt_s")
	if !bytes.Equal(r.Snapshot, state) || r.SnapshotSeq != 6 || r.LastSeq != 12 {
		t.Fatalf("Load = snapshot %d bytes seq %d last %d, want %d bytes seq 6 last 12",
			len(r.Snapshot), r.SnapshotSeq, r.LastSeq, len(state))
	}
	CheckTail(t, "agt_s", r.Tail, append(all[6:], more...))

	// A later snapshot replaces the earlier one.
	if err := s.SaveSnapshot("agt_s", 11, persist.Bytes("state-11")); err != nil {
		t.Fatalf("SaveSnapshot: %v", err)
	}
	r = mustLoad(t, s, "agt_s")
	if string(r.Snapshot) != "state-11" || r.SnapshotSeq != 11 || r.LastSeq != 12 {
		t.Fatalf("Load = %q seq %d last %d, want state-11 11 12", r.Snapshot, r.SnapshotSeq, r.LastSeq)
	}
	CheckTail(t, "agt_s", r.Tail, more[1:])
}

// pieces is a State written out in pieces of at most n bytes, as the
// engine's encoder writes a snapshot; after fail bytes it fails with err.
type pieces struct {
	b    []byte
	n    int
	fail int
	err  error
}

func (p pieces) WriteTo(w io.Writer) (int64, error) {
	var done int64
	for b := p.b; len(b) > 0; {
		if p.err != nil && done >= int64(p.fail) {
			return done, p.err
		}
		k, err := w.Write(b[:min(p.n, len(b))])
		done += int64(k)
		if err != nil {
			return done, err
		}
		b = b[k:]
	}
	return done, nil
}

// A state written in many pieces is stored and loaded whole.
func testSnapshotInPieces(t *testing.T, s AgentLog) {
	mustAppend(t, s, "agt_p", 1, Events("agt_p", 1, 4))
	state := make([]byte, 300_000)
	for i := range state {
		state[i] = byte(i*7 + i/1000) // compressible, not trivially
	}
	if err := s.SaveSnapshot("agt_p", 3, pieces{b: state, n: 4093}); err != nil {
		t.Fatalf("SaveSnapshot: %v", err)
	}
	r := mustLoad(t, s, "agt_p")
	if !bytes.Equal(r.Snapshot, state) || r.SnapshotSeq != 3 || r.LastSeq != 4 {
		t.Fatalf("Load = snapshot of %d bytes (equal: %v) at %d, last %d; want the %d bytes written at 3, last 4",
			len(r.Snapshot), bytes.Equal(r.Snapshot, state), r.SnapshotSeq, r.LastSeq, len(state))
	}
	CheckTail(t, "agt_p", r.Tail, Events("agt_p", 4, 1))
}

// A state that fails to write fails the save, which changes nothing: the
// snapshot before it and the events after that stay.
func testSnapshotStateError(t *testing.T, s AgentLog) {
	all := Events("agt_e", 1, 6)
	mustAppend(t, s, "agt_e", 1, all)
	if err := s.SaveSnapshot("agt_e", 2, persist.Bytes("state-2")); err != nil {
		t.Fatalf("SaveSnapshot: %v", err)
	}
	broken := errors.New("encoder broke")
	err := s.SaveSnapshot("agt_e", 5, pieces{b: bytes.Repeat([]byte("x"), 100_000), n: 1000, fail: 50_000, err: broken})
	if !errors.Is(err, broken) {
		t.Fatalf("SaveSnapshot of a failing state = %v, want it to wrap %v", err, broken)
	}
	r := mustLoad(t, s, "agt_e")
	if string(r.Snapshot) != "state-2" || r.SnapshotSeq != 2 || r.LastSeq != 6 {
		t.Fatalf("Load = %q at %d, last %d; want state-2 at 2, last 6", r.Snapshot, r.SnapshotSeq, r.LastSeq)
	}
	CheckTail(t, "agt_e", r.Tail, all[2:])
}

func testSnapshotAtLastSeq(t *testing.T, s AgentLog) {
	mustAppend(t, s, "agt_l", 1, Events("agt_l", 1, 3))
	if err := s.SaveSnapshot("agt_l", 3, persist.Bytes([]byte{})); err != nil {
		t.Fatalf("SaveSnapshot: %v", err)
	}
	r := mustLoad(t, s, "agt_l")
	if r.Snapshot == nil || len(r.Snapshot) != 0 || r.SnapshotSeq != 3 || r.LastSeq != 3 || len(r.Tail) != 0 {
		t.Fatalf("Load = %+v, want empty non-nil snapshot at 3, no tail", r)
	}
	mustAppend(t, s, "agt_l", 4, Events("agt_l", 4, 1))
	CheckTail(t, "agt_l", mustLoad(t, s, "agt_l").Tail, Events("agt_l", 4, 1))
}

func testStaleSnapshot(t *testing.T, s AgentLog) {
	mustAppend(t, s, "agt_st", 1, Events("agt_st", 1, 6))
	if err := s.SaveSnapshot("agt_st", 5, persist.Bytes("five")); err != nil {
		t.Fatalf("SaveSnapshot(5): %v", err)
	}
	if err := s.SaveSnapshot("agt_st", 2, persist.Bytes("two")); err != nil {
		t.Fatalf("SaveSnapshot(2): %v", err)
	}
	r := mustLoad(t, s, "agt_st")
	if string(r.Snapshot) != "five" || r.SnapshotSeq != 5 {
		t.Fatalf("Load snapshot = %q at %d, want five at 5", r.Snapshot, r.SnapshotSeq)
	}
	CheckTail(t, "agt_st", r.Tail, Events("agt_st", 6, 1))
}

// A snapshot at the stored one's seq is not older: it replaces it.
func testSameSeqSnapshot(t *testing.T, s AgentLog) {
	mustAppend(t, s, "agt_ss", 1, Events("agt_ss", 1, 6))
	for _, state := range []string{"first", "second"} {
		if err := s.SaveSnapshot("agt_ss", 5, persist.Bytes([]byte(state))); err != nil {
			t.Fatalf("SaveSnapshot(5, %s): %v", state, err)
		}
	}
	r := mustLoad(t, s, "agt_ss")
	if string(r.Snapshot) != "second" || r.SnapshotSeq != 5 {
		t.Fatalf("Load snapshot = %q at %d, want second at 5", r.Snapshot, r.SnapshotSeq)
	}
	CheckTail(t, "agt_ss", r.Tail, Events("agt_ss", 6, 1))
}

// A batch may end exactly at the largest sequence number; one that would
// run past it is refused (see testInvalid). The snapshot makes the log
// contiguous.
func testLastSeqAtMax(t *testing.T, s AgentLog) {
	const last = 1<<64 - 1
	evs := Events("agt_max", last-1, 2)
	mustAppend(t, s, "agt_max", last-1, evs)
	if err := s.SaveSnapshot("agt_max", last-1, persist.Bytes("snap")); err != nil {
		t.Fatalf("SaveSnapshot: %v", err)
	}
	r := mustLoad(t, s, "agt_max")
	if string(r.Snapshot) != "snap" || r.SnapshotSeq != last-1 || r.LastSeq != last {
		t.Fatalf("Load = %q at %d, last %d; want snap at %d, last %d", r.Snapshot, r.SnapshotSeq, r.LastSeq, uint64(last-1), uint64(last))
	}
	CheckTail(t, "agt_max", r.Tail, evs[1:])
}

func testUnknownAgent(t *testing.T, s AgentLog) {
	mustAppend(t, s, "agt_known", 1, Events("agt_known", 1, 2))
	for _, agent := range []string{"agt_unknown", "agt_know", "agt_known2"} {
		if r := mustLoad(t, s, agent); !reflect.DeepEqual(r, persist.Recovered{}) {
			t.Fatalf("Load(%s) = %+v, want zero", agent, r)
		}
	}
}

// An agent id that is a prefix of another must not see its events.
func testAgentsIsolated(t *testing.T, s AgentLog) {
	mustAppend(t, s, "a", 1, Events("a", 1, 2))
	mustAppend(t, s, "ab", 1, Events("ab", 1, 3))
	mustAppend(t, s, "a0", 1, Events("a0", 1, 1))
	if err := s.SaveSnapshot("ab", 2, persist.Bytes("ab")); err != nil {
		t.Fatal(err)
	}
	CheckTail(t, "a", mustLoad(t, s, "a").Tail, Events("a", 1, 2))
	CheckTail(t, "ab", mustLoad(t, s, "ab").Tail, Events("ab", 3, 1))
	CheckTail(t, "a0", mustLoad(t, s, "a0").Tail, Events("a0", 1, 1))
	if r := mustLoad(t, s, "a"); r.Snapshot != nil {
		t.Fatalf("agent a sees snapshot %q", r.Snapshot)
	}
}

func testInvalid(t *testing.T, s AgentLog) {
	ev := [][]byte{[]byte("x")}
	for name, err := range map[string]error{
		"first 0":        s.Append(persist.Batch{Agent: "agt", First: 0, Events: ev}),
		"empty agent":    s.Append(persist.Batch{Agent: "", First: 1, Events: ev}),
		"slash agent":    s.Append(persist.Batch{Agent: "a/b", First: 1, Events: ev}),
		"leading slash":  s.Append(persist.Batch{Agent: "/a", First: 1, Events: ev}),
		"ending slash":   s.Append(persist.Batch{Agent: "a/", First: 1, Events: ev}),
		"empty index":    s.Append(persist.Batch{Agent: "agt", First: 1, Events: ev, Index: []persist.KV{{Value: []byte("v")}}}),
		"seq overflow":   s.Append(persist.Batch{Agent: "agt", First: 1<<64 - 1, Events: [][]byte{{1}, {2}}}),
		"seq overflow 3": s.Append(persist.Batch{Agent: "agt", First: 1<<64 - 2, Events: [][]byte{{1}, {2}, {3}}}),
		"snap slash":     s.SaveSnapshot("a/b", 1, persist.Bytes(nil)),
		"load slash":     func() error { _, err := s.Load("a/b"); return err }(),
	} {
		if !errors.Is(err, persist.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	if r := mustLoad(t, s, "agt"); !reflect.DeepEqual(r, persist.Recovered{}) {
		t.Fatalf("rejected appends left %+v", r)
	}
}

func testInvalidDirectory(t *testing.T, s persist.Store) {
	if err := s.Put(persist.KV{Value: []byte("v")}); !errors.Is(err, persist.ErrInvalid) {
		t.Errorf("put empty key: err = %v, want ErrInvalid", err)
	}
}

func testDirectory(t *testing.T, s persist.Store) {
	if _, err := s.Get([]byte("ws/1")); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("Get absent: err = %v, want ErrNotFound", err)
	}
	err := s.Put(
		persist.KV{Key: []byte("ws/2"), Value: []byte("two")},
		persist.KV{Key: []byte("ws/1"), Value: []byte("one")},
		persist.KV{Key: []byte("ws/3"), Value: []byte{}},
		persist.KV{Key: []byte("wt/1"), Value: []byte("other")},
		persist.KV{Key: []byte("w"), Value: []byte("short")},
	)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	v, err := s.Get([]byte("ws/1"))
	if err != nil || string(v) != "one" {
		t.Fatalf("Get(ws/1) = %q, %v", v, err)
	}
	v[0] = 'X'
	if v, _ := s.Get([]byte("ws/1")); string(v) != "one" {
		t.Fatalf("mutating a Get result changed the store: %q", v)
	}
	if v, err := s.Get([]byte("ws/3")); err != nil || len(v) != 0 {
		t.Fatalf("Get(ws/3) = %q, %v; want empty value", v, err)
	}
	if got := scan(t, s, "ws/"); got != "ws/1=one ws/2=two ws/3= " {
		t.Fatalf("Scan(ws/) = %q", got)
	}
	if err := s.Put(persist.KV{Key: []byte("ws/2")}); err != nil {
		t.Fatalf("Put delete: %v", err)
	}
	if _, err := s.Get([]byte("ws/2")); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("Get deleted: err = %v, want ErrNotFound", err)
	}
	if got := scan(t, s, "ws/"); got != "ws/1=one ws/3= " {
		t.Fatalf("Scan(ws/) after delete = %q", got)
	}
	if got := scan(t, s, ""); got != "w=short ws/1=one ws/3= wt/1=other " {
		t.Fatalf("Scan(all) = %q", got)
	}
	if got := scan(t, s, "\xff"); got != "" {
		t.Fatalf("Scan(\\xff) = %q", got)
	}
}

func scan(t *testing.T, s persist.Store, prefix string) string {
	t.Helper()
	var b bytes.Buffer
	err := s.Scan([]byte(prefix), func(k, v []byte) error {
		fmt.Fprintf(&b, "%s=%s ", k, v)
		return nil
	})
	if err != nil {
		t.Fatalf("Scan(%q): %v", prefix, err)
	}
	return b.String()
}

// Directory keys that look like log keys must neither see nor disturb logs.
func testDirectoryIsolation(t *testing.T, s persist.Store) {
	mustAppend(t, s, "x", 1, Events("x", 1, 2))
	if err := s.SaveSnapshot("x", 1, persist.Bytes("snap")); err != nil {
		t.Fatal(err)
	}
	if got := scan(t, s, ""); got != "" {
		t.Fatalf("Scan(all) on logs only = %q, want nothing", got)
	}
	keys := []string{"e/x/", "e/x/\x00\x00\x00\x00\x00\x00\x00\x02", "e/x0", "h/x", "s/x", "d/", "e", "s"}
	for _, k := range keys {
		if err := s.Put(persist.KV{Key: []byte(k), Value: []byte("dir")}); err != nil {
			t.Fatal(err)
		}
	}
	r := mustLoad(t, s, "x")
	if string(r.Snapshot) != "snap" || r.SnapshotSeq != 1 {
		t.Fatalf("snapshot disturbed: %q at %d", r.Snapshot, r.SnapshotSeq)
	}
	CheckTail(t, "x", r.Tail, Events("x", 2, 1))
	for _, k := range keys {
		if err := s.Put(persist.KV{Key: []byte(k)}); err != nil {
			t.Fatal(err)
		}
	}
	CheckTail(t, "x", mustLoad(t, s, "x").Tail, Events("x", 2, 1))
}

func testIndex(t *testing.T, s persist.Store) {
	if err := s.Put(persist.KV{Key: []byte("run/old"), Value: []byte("agt_i")}); err != nil {
		t.Fatal(err)
	}
	err := s.Append(persist.Batch{
		Agent: "agt_i", First: 1, Events: Events("agt_i", 1, 2),
		Index: []persist.KV{{Key: []byte("run/r1"), Value: []byte("agt_i")}, {Key: []byte("run/old")}},
	})
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if v, err := s.Get([]byte("run/r1")); err != nil || string(v) != "agt_i" {
		t.Fatalf("Get(run/r1) = %q, %v", v, err)
	}
	if _, err := s.Get([]byte("run/old")); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("index delete: err = %v, want ErrNotFound", err)
	}
	CheckTail(t, "agt_i", mustLoad(t, s, "agt_i").Tail, Events("agt_i", 1, 2))
	// An index-only batch is allowed: its entries are written, and the
	// log is left as it was whatever its First.
	for _, first := range []uint64{3, 10} {
		key := fmt.Appendf(nil, "run/at%d", first)
		if err := s.Append(persist.Batch{Agent: "agt_i", First: first, Index: []persist.KV{{Key: key, Value: []byte("agt_i")}}}); err != nil {
			t.Fatalf("index-only Append (First %d): %v", first, err)
		}
		if v, err := s.Get(key); err != nil || string(v) != "agt_i" {
			t.Fatalf("Get(%s) after an index-only Append = %q, %v", key, v, err)
		}
		r := mustLoad(t, s, "agt_i")
		if r.LastSeq != 2 {
			t.Fatalf("index-only Append (First %d) moved LastSeq to %d", first, r.LastSeq)
		}
		CheckTail(t, "agt_i", r.Tail, Events("agt_i", 1, 2))
	}
}

func testDeleteRange(t *testing.T, s persist.Store) {
	for _, k := range []string{"a/1", "a/2", "a/3", "b/1"} {
		if err := s.Put(persist.KV{Key: []byte(k), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Append(persist.Batch{Agent: "a", First: 1, Events: [][]byte{[]byte("e1")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange([]byte("a/2"), []byte("b/1")); err != nil {
		t.Fatal(err)
	}
	if got := scan(t, s, ""); got != "a/1=v b/1=v " {
		t.Fatalf("after DeleteRange[a/2, b/1): %q", got)
	}
	if rec, err := s.Load("a"); err != nil || len(rec.Tail) != 1 {
		t.Fatalf("DeleteRange touched the log: %+v, %v", rec, err)
	}
	for name, err := range map[string]error{
		"empty start":    s.DeleteRange(nil, []byte("z")),
		"end before":     s.DeleteRange([]byte("b"), []byte("a")),
		"empty interval": s.DeleteRange([]byte("a"), []byte("a")),
	} {
		if !errors.Is(err, persist.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

func testScanError(t *testing.T, s persist.Store) {
	if err := s.Put(persist.KV{Key: []byte("k1"), Value: []byte("1")}, persist.KV{Key: []byte("k2"), Value: []byte("2")}); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	calls := 0
	err := s.Scan([]byte("k"), func(k, v []byte) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("Scan = %v after %d calls, want stop after 1", err, calls)
	}
}

func testConcurrentAgents(t *testing.T, s AgentLog) {
	const agents, batches = 32, 40
	var wg sync.WaitGroup
	errs := make(chan error, agents)
	for a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			agent := fmt.Sprintf("agt_%02d", a)
			seq := uint64(1)
			for i := range batches {
				n := 1 + (a+i)%3
				if err := s.Append(persist.Batch{Agent: agent, First: seq, Events: Events(agent, seq, n)}); err != nil {
					errs <- fmt.Errorf("%s: %w", agent, err)
					return
				}
				seq += uint64(n)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for a := range agents {
		agent := fmt.Sprintf("agt_%02d", a)
		total := 0
		for i := range batches {
			total += 1 + (a+i)%3
		}
		r := mustLoad(t, s, agent)
		CheckTail(t, agent, r.Tail, Events(agent, 1, total))
		if r.LastSeq != uint64(total) {
			t.Fatalf("%s: LastSeq = %d, want %d", agent, r.LastSeq, total)
		}
	}
}

func testClose(t *testing.T, s persist.Store) {
	mustAppend(t, s, "agt", 1, Events("agt", 1, 1))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, loadErr := s.Load("agt")
	_, getErr := s.Get([]byte("k"))
	for name, err := range map[string]error{
		"Append":       s.Append(persist.Batch{Agent: "agt", First: 2, Events: Events("agt", 2, 1)}),
		"SaveSnapshot": s.SaveSnapshot("agt", 1, persist.Bytes(nil)),
		"Load":         loadErr,
		"Get":          getErr,
		"Put":          s.Put(persist.KV{Key: []byte("k"), Value: []byte("v")}),
		"Scan":         s.Scan(nil, func(k, v []byte) error { return nil }),
		"DeleteRange":  s.DeleteRange([]byte("a"), []byte("b")),
		"Close":        s.Close(),
	} {
		if !errors.Is(err, persist.ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed", name, err)
		}
	}
}
