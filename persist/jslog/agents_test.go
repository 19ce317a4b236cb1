package jslog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/internal/jstest"
	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/pebblelog"
	"github.com/plaudit/plaudit/persist/persisttest"
)

// contractPartitions is how many partitions the contract's agents spread
// over; the test node owns them all.
const contractPartitions = 4

func partitionOf(agent string) int { return int(agent[len(agent)-1]) % contractPartitions }

func TestAgentsKeepThePersistContract(t *testing.T) {
	persisttest.RunAgentLogContract(t, func(t *testing.T) persisttest.AgentLog {
		js := startJetStream(t)
		a, err := NewAgents(context.Background(), js, AgentsConfig{Partition: partitionOf})
		if err != nil {
			t.Fatal(err)
		}
		for p := range contractPartitions {
			a.Own(p, openLog(t, js, p, 1))
		}
		return a
	})
}

// node is one cluster node's Agents, owning every contract partition at
// the given epoch.
func node(t *testing.T, js jetstream.JetStream, epoch uint64) *Agents {
	t.Helper()
	a, err := NewAgents(context.Background(), js, AgentsConfig{Partition: partitionOf})
	if err != nil {
		t.Fatal(err)
	}
	for p := range contractPartitions {
		a.Own(p, openLog(t, js, p, epoch))
	}
	return a
}

func appendEvents(t *testing.T, a *Agents, agent string, first uint64, n int) {
	t.Helper()
	if err := a.Append(persist.Batch{Agent: agent, First: first, Events: persisttest.Events(agent, first, n)}); err != nil {
		t.Fatalf("Append %s@%d: %v", agent, first, err)
	}
}

func TestANewOwnerLoadsTheOldOwnersSnapshotAndTail(t *testing.T) {
	js := startJetStream(t)
	old := node(t, js, 1)
	appendEvents(t, old, "agt_1", 1, 3)
	if err := old.SaveSnapshot("agt_1", 2, persist.Bytes("state at 2")); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, old, "agt_1", 4, 2)
	next := node(t, js, 2)
	r, err := next.Load("agt_1")
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Snapshot) != "state at 2" || r.SnapshotSeq != 2 || r.LastSeq != 5 {
		t.Fatalf("new owner loads %q at %d, last %d; want the old owner's snapshot at 2, last 5", r.Snapshot, r.SnapshotSeq, r.LastSeq)
	}
	persisttest.CheckTail(t, "agt_1", r.Tail, persisttest.Events("agt_1", 3, 3))
}

func TestADeposedOwnersSnapshotIsNeverLoaded(t *testing.T) {
	js := startJetStream(t)
	old := node(t, js, 1)
	appendEvents(t, old, "agt_1", 1, 4)
	next := node(t, js, 2)
	if err := old.SaveSnapshot("agt_1", 4, persist.Bytes("deposed")); !errors.Is(err, ErrFenced) {
		t.Fatalf("the deposed owner's SaveSnapshot: %v, want ErrFenced", err)
	}
	r, err := next.Load("agt_1")
	if err != nil {
		t.Fatal(err)
	}
	if r.Snapshot != nil || r.LastSeq != 4 || len(r.Tail) != 4 {
		t.Fatalf("new owner loads snapshot %q, last %d, %d events; want no snapshot and the four events", r.Snapshot, r.LastSeq, len(r.Tail))
	}
	// Nor is its object left behind.
	names := objects(t, next)
	if len(names) != 0 {
		t.Fatalf("snapshot objects after a fenced save: %v", names)
	}
}

func objects(t *testing.T, a *Agents) []string {
	t.Helper()
	infos, err := a.obj.List(context.Background())
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range infos {
		names = append(names, i.Name)
	}
	return names
}

func TestASnapshotTrimsTheEventsItCoversAndReplacesTheOlderSnapshot(t *testing.T) {
	js := startJetStream(t)
	a := node(t, js, 1)
	for i := range uint64(5) {
		appendEvents(t, a, "agt_1", 1+2*i, 2) // batches ending at 2, 4, 6, 8, 10
	}
	appendEvents(t, a, "agt_2", 1, 1)
	if err := a.SaveSnapshot("agt_1", 5, persist.Bytes("five")); err != nil {
		t.Fatal(err)
	}
	// Batches ending at 2 and 4 are covered; the one holding 5 and 6 is not.
	if got, _ := tail(t, a.logs[partitionOf("agt_1")], "agt_1", 0); len(got) != 3 || got[0].First != 5 {
		t.Fatalf("after the snapshot at 5 the log holds %d batches from %d, want 3 from 5", len(got), got[0].First)
	}
	if err := a.SaveSnapshot("agt_1", 10, persist.Bytes("ten")); err != nil {
		t.Fatal(err)
	}
	if got, _ := tail(t, a.logs[partitionOf("agt_1")], "agt_1", 0); len(got) != 0 {
		t.Fatalf("after the snapshot at 10 the log holds %+v", got)
	}
	if names := objects(t, a); len(names) != 1 || !strings.HasPrefix(names[0], "agt_1.10.") {
		t.Fatalf("snapshot objects: %v, want only the one at 10", names)
	}
	r, err := a.Load("agt_1")
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Snapshot) != "ten" || r.LastSeq != 10 || len(r.Tail) != 0 {
		t.Fatalf("Load: %q, last %d, tail %d", r.Snapshot, r.LastSeq, len(r.Tail))
	}
	// Another agent of the partition keeps its events.
	if r, _ := a.Load("agt_2"); r.LastSeq != 1 {
		t.Fatalf("agt_2 after agt_1's trims: last %d", r.LastSeq)
	}
}

func TestAnAgentOfAPartitionNotOwnedHereIsRefused(t *testing.T) {
	js := startJetStream(t)
	a := node(t, js, 1)
	appendEvents(t, a, "agt_1", 1, 1)
	a.Disown(partitionOf("agt_1"))
	if err := a.Append(persist.Batch{Agent: "agt_1", First: 2, Events: [][]byte{[]byte("x")}}); !errors.Is(err, ErrNotOwner) {
		t.Errorf("Append: %v, want ErrNotOwner", err)
	}
	if _, err := a.Load("agt_1"); !errors.Is(err, ErrNotOwner) {
		t.Errorf("Load: %v, want ErrNotOwner", err)
	}
	if err := a.SaveSnapshot("agt_1", 1, persist.Bytes(nil)); !errors.Is(err, ErrNotOwner) {
		t.Errorf("SaveSnapshot: %v, want ErrNotOwner", err)
	}
}

func TestStoreKeepsThePersistContract(t *testing.T) {
	persisttest.RunContract(t, func(t *testing.T) persist.Store { return nodeStore(t, startJetStream(t)) })
}

// nodeStore is one node's Store on js: agents at epoch 1, the directory
// mirrored into a Pebble store of its own.
func nodeStore(t *testing.T, js jetstream.JetStream) *Store {
	t.Helper()
	local, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := OpenDirectory(context.Background(), js, local, DirectoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return NewStore(node(t, js, 1), dir, local)
}

// A node that owns a partition again knows nothing of what another owner
// wrote meanwhile until it reads the log: a snapshot older than the one
// stored is ignored, even if it never loaded the agent since.
func TestAPartitionOwnedAgainForgetsWhatItKnewOfItsAgents(t *testing.T) {
	js := startJetStream(t)
	a := node(t, js, 1)
	appendEvents(t, a, "agt_1", 1, 1)
	p := partitionOf("agt_1")
	a.Disown(p)
	b := node(t, js, 2)
	appendEvents(t, b, "agt_1", 2, 2)
	if err := b.SaveSnapshot("agt_1", 3, persist.Bytes("three")); err != nil {
		t.Fatal(err)
	}
	b.Disown(p)
	a.Own(p, openLog(t, js, p, 3))
	if err := a.SaveSnapshot("agt_1", 1, persist.Bytes("one")); err != nil {
		t.Fatal(err)
	}
	r, err := a.Load("agt_1")
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Snapshot) != "three" || r.LastSeq != 3 {
		t.Fatalf("Load after an older snapshot: %q, last %d; want the stored one at 3", r.Snapshot, r.LastSeq)
	}
}

func TestASnapshotSavedAgainWithNothingNewKeepsTheAgent(t *testing.T) {
	js := startJetStream(t)
	a := node(t, js, 1)
	appendEvents(t, a, "agt_1", 1, 4)
	for _, state := range []string{"first", "again"} {
		if err := a.SaveSnapshot("agt_1", 4, persist.Bytes([]byte(state))); err != nil {
			t.Fatalf("snapshot %q at 4: %v", state, err)
		}
	}
	r, err := a.Load("agt_1")
	if err != nil || string(r.Snapshot) != "again" || r.LastSeq != 4 || len(r.Tail) != 0 {
		t.Fatalf("Load: %q, last %d, tail %d, %v; want the second snapshot alone", r.Snapshot, r.LastSeq, len(r.Tail), err)
	}
	appendEvents(t, a, "agt_1", 5, 1)
	if r, err := a.Load("agt_1"); err != nil || r.LastSeq != 5 || len(r.Tail) != 1 {
		t.Fatalf("after one more event: last %d, tail %d, %v", r.LastSeq, len(r.Tail), err)
	}
}

func TestADamagedSnapshotPointerIsCorruption(t *testing.T) {
	js := startJetStream(t)
	a := node(t, js, 1)
	appendEvents(t, a, "agt_1", 1, 1)
	l := a.logs[partitionOf("agt_1")]
	for i, bad := range [][]byte{{pointerFormat, 0, 0, 0, 0}, {9, 0, 0, 0, 0, 0, 0, 0, 1, 'x'}} {
		if _, err := l.publish(context.Background(), pointerSubject(l, "agt_1"), fmt.Sprint("bad", i), bad); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Load("agt_1"); !errors.Is(err, persist.ErrCorrupt) {
			t.Fatalf("Load with the pointer %x: %v, want ErrCorrupt", bad, err)
		}
	}
}

// A node may snapshot an agent it has not loaded or written since it took
// the partition: it reads the log first, then saves.
func TestASnapshotOfAnAgentNotLoadedHereIsSaved(t *testing.T) {
	js := startJetStream(t)
	a := node(t, js, 1)
	appendEvents(t, a, "agt_1", 1, 3)
	b := node(t, js, 2)
	if err := b.SaveSnapshot("agt_1", 3, persist.Bytes("three")); err != nil {
		t.Fatal(err)
	}
	r, err := node(t, js, 3).Load("agt_1")
	if err != nil || string(r.Snapshot) != "three" || r.LastSeq != 3 || len(r.Tail) != 0 {
		t.Fatalf("Load: %q, last %d, tail %d, %v; want the snapshot at 3", r.Snapshot, r.LastSeq, len(r.Tail), err)
	}
}

// The snapshot bucket is read from its stream's leader, whether this node
// made it or found it made with direct gets (by another node, or an
// earlier version): a direct get may go to a paused server's copy, which
// never answers.
func TestTheSnapshotBucketIsReadFromItsLeader(t *testing.T) {
	for _, made := range []string{"by this node", "with direct gets"} {
		t.Run(made, func(t *testing.T) {
			js := startJetStream(t)
			ctx := context.Background()
			if made == "with direct gets" {
				if _, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: SnapshotBucket}); err != nil {
					t.Fatal(err)
				}
			}
			a := node(t, js, 1)
			s, err := js.Stream(ctx, "OBJ_"+SnapshotBucket)
			if err != nil {
				t.Fatal(err)
			}
			if s.CachedInfo().Config.AllowDirect {
				t.Fatal("the snapshot bucket's stream allows direct gets")
			}
			appendEvents(t, a, "agt_1", 1, 3)
			if err := a.SaveSnapshot("agt_1", 3, persist.Bytes("state")); err != nil {
				t.Fatal(err)
			}
			r, err := node(t, js, 2).Load("agt_1")
			if err != nil || string(r.Snapshot) != "state" || r.SnapshotSeq != 3 {
				t.Fatalf("a new owner loads %q at %d, %v; want the snapshot at 3", r.Snapshot, r.SnapshotSeq, err)
			}
		})
	}
}

// A snapshot whose pointer went unanswered, though stored, keeps its
// object: deleted, it failed every load of the agent, on every node.
func TestASnapshotWhosePointerWentUnansweredKeepsItsObject(t *testing.T) {
	lost := &lostJS{JetStream: startJetStream(t)}
	old := node(t, lost, 1)
	appendEvents(t, old, "agt_a", 1, 3)
	lost.lose(stored)
	if err := old.SaveSnapshot("agt_a", 3, persist.Bytes("state at 3")); err == nil {
		t.Fatal("a snapshot whose pointer went unanswered succeeded")
	}
	r, err := node(t, lost, 2).Load("agt_a")
	if err != nil {
		t.Fatalf("a new owner's load: %v", err)
	}
	if r.SnapshotSeq != 3 || string(r.Snapshot) != "state at 3" || r.LastSeq != 3 {
		t.Fatalf("a new owner's load: snapshot at %d %q, last event %d; want the snapshot at 3", r.SnapshotSeq, r.Snapshot, r.LastSeq)
	}
}

// A stream whose leader stops is leaderless until its copies elect
// another, and never answers a request sent meanwhile. A new owner loading
// an agent then (its partition moved because its old owner's server
// stopped) gets the agent once the snapshot bucket has its new leader: its
// reads are retried in short tries, where one read used to wait out the
// whole Timeout and fail.
func TestALoadDuringTheBucketsElectionWaitsForItsNewLeader(t *testing.T) {
	servers := jstest.Servers(t, 3)
	onPartition0 := func(string) int { return 0 }
	replicated := func(js jetstream.JetStream, epoch uint64) *Agents {
		t.Helper()
		l := openReplicated(t, js, 3, epoch)
		a, err := NewAgents(context.Background(), js, AgentsConfig{Partition: onPartition0, Replicas: 3})
		if err != nil {
			t.Fatal(err)
		}
		a.Own(0, l)
		return a
	}
	old := replicated(jetStream(t, connect(t, servers[0].ClientURL())), 1)
	appendEvents(t, old, "agt_1", 1, 3)
	if err := old.SaveSnapshot("agt_1", 2, persist.Bytes("state at 2")); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, old, "agt_1", 4, 2)

	info, err := old.obj.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	bucketLeader := info.(*jetstream.ObjectBucketStatus).StreamInfo().Cluster.Leader
	victim := slices.IndexFunc(servers, func(s *server.Server) bool { return s.Name() == bucketLeader })
	if victim < 0 {
		t.Fatalf("the bucket's leader %q is none of the servers", bucketLeader)
	}
	survivor := servers[(victim+1)%len(servers)]
	next := replicated(jetStream(t, connect(t, survivor.ClientURL())), 2)

	servers[victim].Shutdown()
	r, err := next.Load("agt_1")
	if err != nil {
		t.Fatalf("loading while the bucket elects a leader: %v", err)
	}
	if string(r.Snapshot) != "state at 2" || r.SnapshotSeq != 2 || r.LastSeq != 5 {
		t.Fatalf("loaded %q at %d, last %d; want the snapshot at 2, last 5", r.Snapshot, r.SnapshotSeq, r.LastSeq)
	}
}

// A store whose JetStream does not answer in time says so with
// persist.ErrUnavailable, which the doors answer 503 and a client retries,
// not as a failure of the server's own (500).
func TestAStoreWhoseJetStreamDoesNotAnswerIsUnavailable(t *testing.T) {
	servers := jstest.Servers(t, 1)
	js := jetStream(t, connect(t, servers[0].ClientURL()))
	local, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	dir, err := OpenDirectory(context.Background(), js, local, DirectoryConfig{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dir.Close)
	s := NewStore(node(t, js, 1), dir, local)
	if err := s.Put(persist.KV{Key: []byte("k/1"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	servers[0].Shutdown()
	err = s.Put(persist.KV{Key: []byte("k/2"), Value: []byte("v")})
	if !errors.Is(err, persist.ErrUnavailable) {
		t.Fatalf("Put with JetStream gone: %v, want persist.ErrUnavailable", err)
	}
}
