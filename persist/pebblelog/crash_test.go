package pebblelog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/plaudit/plaudit/persist"
)

// TestCrashKeepsAcknowledgedEvents crashes a crashable MemFS while writers
// run and checks that every event whose Append returned nil before the crash
// is recovered, in order, with nothing but submitted events after it.
func TestCrashKeepsAcknowledgedEvents(t *testing.T) {
	iterations, maxAppends := 16, 4000
	if raceEnabled {
		iterations, maxAppends = 10, 1500
	}
	if testing.Short() {
		iterations = 3
	}
	for i := range iterations {
		seed := uint64(1000 + i)
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { crashOnce(t, seed, maxAppends) })
	}
}

// crashAgent is one agent's history as its writer saw it. attempted is
// written only by the owning writer and read after the writers stop; acked is
// read concurrently by the crasher.
type crashAgent struct {
	id        string
	attempted [][]byte
	acked     atomic.Uint64 // last acknowledged seq
}

func crashOnce(t *testing.T, seed uint64, maxAppends int) {
	const writers, perWriter = 16, 4
	rng := rand.New(rand.NewPCG(seed, 1))
	fs := vfs.NewCrashableMem()
	// A small memtable makes flushes and compactions race the crash too.
	s, err := Open("db", Options{FS: fs, MemTableSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	agents := make([]*crashAgent, writers*perWriter)
	for i := range agents {
		agents[i] = &crashAgent{id: fmt.Sprintf("agt_%02d", i)}
	}
	var (
		total atomic.Int64
		stop  atomic.Bool
		wg    sync.WaitGroup
		errs  = make(chan error, writers)
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wrng := rand.New(rand.NewPCG(seed, uint64(w)+2))
			mine := agents[w*perWriter : (w+1)*perWriter]
			for i := 0; !stop.Load(); i++ {
				if err := crashStep(s, mine[i%perWriter], wrng); err != nil {
					errs <- err
					return
				}
				total.Add(1)
			}
		}()
	}

	target := int64(50 + rng.IntN(maxAppends))
	for total.Load() < target && len(errs) == 0 {
		time.Sleep(50 * time.Microsecond)
	}
	// Read the acknowledgements before cloning: each was synced before it
	// was recorded, so the clone must hold it.
	mustHave := make([]uint64, len(agents))
	for i, a := range agents {
		mustHave[i] = a.acked.Load()
	}
	unsynced := rng.IntN(101)
	clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(seed, 0))})
	time.Sleep(time.Millisecond) // writers keep going past the crash point
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	flushes := s.db.Metrics().Flush.Count
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open("db", Options{FS: clone})
	if err != nil {
		t.Fatalf("open crash clone: %v", err)
	}
	defer s.Close()
	acked, recovered := uint64(0), uint64(0)
	for i, a := range agents {
		r, err := s.Load(a.id)
		if err != nil {
			t.Fatalf("unsynced=%d%%: %v", unsynced, err)
		}
		got := append(decodeHistory(t, a.id, r.Snapshot), r.Tail...)
		if uint64(len(got)) != r.LastSeq || r.LastSeq < mustHave[i] {
			t.Fatalf("unsynced=%d%%: agent %s recovered %d events (LastSeq %d), %d were acknowledged",
				unsynced, a.id, len(got), r.LastSeq, mustHave[i])
		}
		for j, ev := range got {
			if !bytes.Equal(ev, a.attempted[j]) {
				t.Fatalf("agent %s: event %d = %q, want %q", a.id, j+1, ev, a.attempted[j])
			}
		}
		acked += mustHave[i]
		recovered += r.LastSeq
	}
	t.Logf("unsynced=%d%%, %d flushes: %d events acknowledged before the crash, %d recovered",
		unsynced, flushes, acked, recovered)

	// The recovered store takes appends where the log left off.
	a := agents[0]
	r, _ := s.Load(a.id)
	if err := s.Append(persist.Batch{Agent: a.id, First: r.LastSeq + 1, Events: [][]byte{[]byte("after")}}); err != nil {
		t.Fatalf("append after recovery: %v", err)
	}
	if r2, err := s.Load(a.id); err != nil || r2.LastSeq != r.LastSeq+1 {
		t.Fatalf("load after recovery append: LastSeq %d, %v", r2.LastSeq, err)
	}
}

// crashStep appends 1–3 events to a and now and then snapshots the
// acknowledged history, as an actor would.
func crashStep(s *Store, a *crashAgent, rng *rand.Rand) error {
	first := uint64(len(a.attempted)) + 1
	evs := make([][]byte, 1+rng.IntN(3))
	for i := range evs {
		evs[i] = fmt.Appendf(nil, "%s#%d#%x", a.id, first+uint64(i), rng.Uint32())
		evs[i] = append(evs[i], bytes.Repeat([]byte{'.'}, rng.IntN(200))...)
	}
	a.attempted = append(a.attempted, evs...)
	if err := s.Append(persist.Batch{Agent: a.id, First: first, Events: evs}); err != nil {
		return fmt.Errorf("append %s@%d: %w", a.id, first, err)
	}
	last := first + uint64(len(evs)) - 1
	a.acked.Store(last)
	if rng.IntN(8) == 0 {
		if err := s.SaveSnapshot(a.id, last, persist.Bytes(encodeHistory(a.attempted[:last]))); err != nil {
			return fmt.Errorf("snapshot %s@%d: %w", a.id, last, err)
		}
	}
	return nil
}

// encodeHistory is the test's snapshot state: every event so far, each
// length-prefixed, so recovery can be checked by content.
func encodeHistory(evs [][]byte) []byte {
	var b []byte
	for _, ev := range evs {
		b = binary.AppendUvarint(b, uint64(len(ev)))
		b = append(b, ev...)
	}
	return b
}

func decodeHistory(t *testing.T, agent string, b []byte) [][]byte {
	var evs [][]byte
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			t.Fatalf("agent %s: bad snapshot state", agent)
		}
		evs = append(evs, b[k:k+int(n)])
		b = b[k+int(n):]
	}
	return evs
}
