package idempotency

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/pebblelog"
)

// countingStore is a real store that counts its scans and the entries
// they visit.
type countingStore struct {
	*pebblelog.Store
	mu      sync.Mutex
	scans   int
	visited int
}

func (c *countingStore) Scan(prefix []byte, fn func(k, v []byte) error) error {
	c.mu.Lock()
	c.scans++
	c.mu.Unlock()
	return c.Store.Scan(prefix, func(k, v []byte) error {
		c.mu.Lock()
		c.visited++
		c.mu.Unlock()
		return fn(k, v)
	})
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newKeeper(t *testing.T) (*Keeper, *countingStore, *clock) {
	t.Helper()
	s, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	cs := &countingStore{Store: s}
	c := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	k, err := New(cs, 24*time.Hour, c.now)
	if err != nil {
		t.Fatal(err)
	}
	return k, cs, c
}

// TestKeyInProgressThenReplayed: while a key's first request runs, another
// request with it is ErrInProgress; once the first is recorded, the same
// request replays it and another body is ErrKeyReused.
func TestKeyInProgressThenReplayed(t *testing.T) {
	k, _, _ := newKeeper(t)
	body := []byte(`{"a":1}`)
	rec, res, err := k.Begin("default", "POST /x", "key-1", body)
	if rec != nil || res == nil || err != nil {
		t.Fatalf("first Begin = %v, %v, %v", rec, res, err)
	}
	if _, _, err := k.Begin("default", "POST /x", "key-1", body); !errors.Is(err, ErrInProgress) {
		t.Fatalf("second while the first runs: err = %v, want ErrInProgress", err)
	}
	if err := k.Store(res, Record{Status: 201, RequestID: "req_1", Body: []byte(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	k.Release(res)
	rec, res, err = k.Begin("default", "POST /x", "key-1", body)
	if err != nil || res != nil || rec == nil || rec.Status != 201 || string(rec.Body) != `{"ok":true}` || rec.RequestID != "req_1" {
		t.Fatalf("after the first finished: %+v, %v, %v", rec, res, err)
	}
	if _, _, err := k.Begin("default", "POST /x", "key-1", []byte(`{"a":2}`)); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("another body: err = %v, want ErrKeyReused", err)
	}
	// Another scope or workspace is another key.
	for _, c := range [][2]string{{"default", "POST /y"}, {"ws_2", "POST /x"}} {
		if rec, res, err := k.Begin(c[0], c[1], "key-1", body); rec != nil || res == nil || err != nil {
			t.Fatalf("%v: %v, %v, %v", c, rec, res, err)
		}
	}
	var fe *field.Error
	if _, _, err := k.Begin("default", "POST /x", "has space", body); !errors.As(err, &fe) || fe.Path != "Idempotency-Key" {
		t.Fatalf("bad key: %v", err)
	}
}

// TestKeptReservationGoesStale: a key kept reserved because its outcome is
// unknown frees itself after staleReservation, and not before.
func TestKeptReservationGoesStale(t *testing.T) {
	k, _, _ := newKeeper(t)
	_, res, err := k.Begin("default", "POST /y", "key-2", nil)
	if err != nil {
		t.Fatal(err)
	}
	k.Keep(res)
	k.Release(res)
	if _, _, err := k.Begin("default", "POST /y", "key-2", nil); !errors.Is(err, ErrInProgress) {
		t.Fatalf("kept reservation: err = %v, want ErrInProgress", err)
	}
	k.running.Store(string(res.key), time.Now().Add(-staleReservation-time.Second))
	if rec, res, err := k.Begin("default", "POST /y", "key-2", nil); rec != nil || res == nil || err != nil {
		t.Fatalf("stale reservation not taken over: %v, %v, %v", rec, res, err)
	}
}

// TestSweepDeletesExpiredBucketsOnly: records older than the TTL go, younger
// ones stay, and the sweep reads only the expired index entries.
func TestSweepDeletesExpiredBucketsOnly(t *testing.T) {
	k, cs, c := newKeeper(t)
	store := func(key string) {
		t.Helper()
		_, res, err := k.Begin("default", "POST /z", key, nil)
		if err != nil || res == nil {
			t.Fatalf("Begin %s: %v", key, err)
		}
		if err := k.Store(res, Record{Status: 200, RequestID: "req", Body: []byte(key)}); err != nil {
			t.Fatal(err)
		}
		k.Release(res)
	}
	// Expired records in two buckets, half an hour apart; one record in
	// the bucket the sweep stops before, five minutes short of expiring.
	for i := range 30 {
		if i == 15 {
			c.t = c.t.Add(30 * time.Minute)
		}
		store(fmt.Sprint("old-", i))
	}
	c.t = c.t.Add(35 * time.Minute)
	store("mid")
	c.t = c.t.Add(115 * time.Minute)
	for i := range 500 {
		store(fmt.Sprint("new-", i))
	}
	c.t = c.t.Add(22 * time.Hour) // old ones are 25 h and 24.5 h old, mid 23 h 55 min, new ones 22 h
	cs.visited = 0
	if err := k.Sweep(); err != nil {
		t.Fatal(err)
	}
	if cs.visited > 31 { // the 30 expired entries and the seek for the oldest
		t.Fatalf("the sweep visited %d index entries for 30 expired records", cs.visited)
	}
	for i := range 30 {
		if rec, _, err := k.Begin("default", "POST /z", fmt.Sprint("old-", i), nil); rec != nil || err != nil {
			t.Fatalf("old-%d survived the sweep: %v, %v", i, rec, err)
		}
	}
	for _, i := range []int{0, 499} {
		if rec, _, err := k.Begin("default", "POST /z", fmt.Sprint("new-", i), nil); rec == nil || err != nil {
			t.Fatalf("new-%d was swept: %v", i, err)
		}
	}
	n := 0
	_ = cs.Store.Scan([]byte(indexPrefix), func(_, _ []byte) error { n++; return nil })
	if n != 501 {
		t.Fatalf("%d index entries left, want the 501 live ones", n)
	}
	all := 0
	_ = cs.Store.Scan([]byte("idem/"), func(_, _ []byte) error { all++; return nil })
	if all != 1002 {
		t.Fatalf("%d records and index entries left, want the 501 live records and their entries", all)
	}
	c.t = c.t.Add(4 * time.Hour)
	if err := k.Sweep(); err != nil {
		t.Fatal(err)
	}
	left := 0
	_ = cs.Store.Scan([]byte("idem/"), func(_, _ []byte) error { left++; return nil })
	if left != 0 {
		t.Fatalf("%d entries left after everything expired", left)
	}
}

// TestOldLayoutIsDropped: records of the layout before the expiry index,
// which no sweep could find, are removed when a Keeper opens the store.
func TestOldLayoutIsDropped(t *testing.T) {
	s, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old := []persist.KV{{Key: []byte("idem/default/abc/k"), Value: []byte("x")}, {Key: []byte("idem/ws_1/abc/k"), Value: []byte("x")}}
	keep := persist.KV{Key: []byte("run/r1"), Value: []byte("agt")}
	if err := s.Put(append(old, keep)...); err != nil {
		t.Fatal(err)
	}
	if _, err := New(s, time.Hour, time.Now); err != nil {
		t.Fatal(err)
	}
	for _, kv := range old {
		if _, err := s.Get(kv.Key); !errors.Is(err, persist.ErrNotFound) {
			t.Fatalf("%s: %v", kv.Key, err)
		}
	}
	if _, err := s.Get(keep.Key); err != nil {
		t.Fatalf("a directory entry outside idem/ went: %v", err)
	}
}

// TestRecordPastTheTTLIsNotReplayed: a record older than the TTL that no
// sweep has reached yet is gone for Begin: the retry runs anew instead of
// replaying it, and a record within the TTL still replays.
func TestRecordPastTheTTLIsNotReplayed(t *testing.T) {
	k, _, c := newKeeper(t)
	body := []byte(`{"a":1}`)
	_, res, err := k.Begin("default", "POST /x", "key-1", body)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Store(res, Record{Status: 201, RequestID: "req_1", Body: []byte(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	k.Release(res)
	c.t = c.t.Add(24*time.Hour - time.Second)
	if rec, res, err := k.Begin("default", "POST /x", "key-1", body); rec == nil || res != nil || err != nil {
		t.Fatalf("within the TTL: %v, %v, %v; want the record replayed", rec, res, err)
	}
	c.t = c.t.Add(2 * time.Second)
	if rec, res, err := k.Begin("default", "POST /x", "key-1", body); rec != nil || res == nil || err != nil {
		t.Fatalf("past the TTL, not swept: %+v, %v, %v; want the key reserved anew", rec, res, err)
	}
	// Deleted, so that the new record is the key's first write again (a
	// cluster claims records as unique keys).
	if v, err := k.store.Get(recordKey("default", "POST /x", "key-1")); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("the record past the TTL after Begin: %q, %v; want it deleted", v, err)
	}
}

// TestSweepWithNothingExpiredScansOnce: a sweep with no records, or none
// past the TTL, looks at the oldest index bucket and stops there, rather
// than walking the buckets from the epoch or from that bucket on.
func TestSweepWithNothingExpiredScansOnce(t *testing.T) {
	k, cs, _ := newKeeper(t)
	if err := k.Sweep(); err != nil || cs.scans != 1 {
		t.Fatalf("sweep of no records: %d scans, %v; want 1", cs.scans, err)
	}
	_, res, err := k.Begin("default", "POST /x", "key-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Store(res, Record{Status: 201, RequestID: "req_1"}); err != nil {
		t.Fatal(err)
	}
	k.Release(res)
	cs.scans = 0
	if err := k.Sweep(); err != nil || cs.scans != 1 {
		t.Fatalf("sweep of a fresh record: %d scans, %v; want 1", cs.scans, err)
	}
	if rec, _, err := k.Begin("default", "POST /x", "key-1", nil); rec == nil || err != nil {
		t.Fatalf("the fresh record after the sweep: %v, %v", rec, err)
	}
}

// TestSweepKeepsARecordRewrittenSinceItsIndexEntry: a key whose record
// expired and was written again later keeps its new record when the sweep
// reaches the old index entry, even when the new record is one second short
// of the TTL.
func TestSweepKeepsARecordRewrittenSinceItsIndexEntry(t *testing.T) {
	k, _, c := newKeeper(t)
	write := func(body string) {
		t.Helper()
		_, res, err := k.Begin("default", "POST /z", "key-1", nil)
		if err != nil || res == nil {
			t.Fatalf("Begin: %v, %v", res, err)
		}
		if err := k.Store(res, Record{Status: 200, RequestID: "req", Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
		k.Release(res)
	}
	write("first")
	c.t = c.t.Add(25*time.Hour + 5*time.Minute) // expired, not swept
	write("second")
	c.t = c.t.Add(24*time.Hour - time.Second)
	if err := k.Sweep(); err != nil {
		t.Fatal(err)
	}
	if rec, _, err := k.Begin("default", "POST /z", "key-1", nil); rec == nil || string(rec.Body) != "second" || err != nil {
		t.Fatalf("after the sweep: %+v, %v; want the second record replayed", rec, err)
	}
}

// TestStoredRecordDecodesOrIsCorrupt: a stored record decodes to what was
// stored, down to an empty request ID and body; cut inside its fixed fields
// or its request ID it is ErrCorrupt, never a panic.
func TestStoredRecordDecodesOrIsCorrupt(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, rec := range []Record{
		{Status: 201, RequestID: "req_1", Body: []byte(`{"ok":true}`), at: at},
		{Status: 200, RequestID: "req_2", at: at},
		{Status: 409, at: at},
	} {
		b := encodeRecord(rec)
		got, err := decodeRecord(b)
		if err != nil || got.Status != rec.Status || got.RequestID != rec.RequestID ||
			string(got.Body) != string(rec.Body) || !got.at.Equal(at) {
			t.Fatalf("%+v decoded to %+v, %v", rec, got, err)
		}
		for n := range 43 + len(rec.RequestID) {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("%+v cut to %d bytes: panic %v", rec, n, p)
					}
				}()
				if _, err := decodeRecord(b[:n]); !errors.Is(err, persist.ErrCorrupt) {
					t.Fatalf("%+v cut to %d bytes: err = %v, want ErrCorrupt", rec, n, err)
				}
			}()
		}
	}
}

// TestSweepReportsAStoreThatCannotBeRead: a sweep whose store refuses to
// be read (closed here) returns the failure, and Run hands it to report,
// instead of sweeping nothing in silence.
func TestSweepReportsAStoreThatCannotBeRead(t *testing.T) {
	k, cs, _ := newKeeper(t)
	if err := cs.Store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := k.Sweep(); !errors.Is(err, persist.ErrClosed) {
		t.Fatalf("sweep of a closed store: %v; want ErrClosed", err)
	}
	stop := make(chan struct{})
	reported := make(chan error, 1)
	go k.Run(time.Millisecond, stop, func(err error) {
		select {
		case reported <- err:
		default:
		}
	})
	defer close(stop)
	select {
	case err := <-reported:
		if !errors.Is(err, persist.ErrClosed) {
			t.Fatalf("Run reported %v; want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run reported no failure of a closed store")
	}
}
