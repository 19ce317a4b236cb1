// Package idempotency keeps the records behind Idempotency-Key: the first
// response to a keyed request, replayed byte for byte when the request is
// retried.
//
// A key is scoped to (workspace, operation, target); its record holds the
// first response with its status, the request id it carried and a hash of
// the request body. Who writes the record is the caller's choice: a write
// that reaches an agent commits the record in the same batch as its events
// (Records gives the entries), anything else stores it with Store. A key
// whose first request is still running is reserved in memory; another
// request with it is ErrInProgress at once, so a retry storm costs no
// goroutines.
//
// # Key layout
//
//	idem/r/<ws>/<scope hash>/<key>          the record
//	idem/x/<bucket>/<record key>            expiry index entry, empty
//
// <bucket> is the record's time in bucketWidth steps, 16 hex digits, so
// index keys sort by time. The sweeper deletes whole expired buckets with
// one range deletion, reading only the expired entries to find the records
// they point to: it never scans the live ones.
package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/persist"
)

// Errors of the idempotency layer.
var (
	ErrKeyReused  = errors.New("Idempotency-Key was used with a different request body")
	ErrInProgress = errors.New("a request with this Idempotency-Key is still in progress")
)

var keyPattern = regexp.MustCompile(`^[\x21-\x7e]{1,200}$`)

// Store is what the records need on disk.
type Store interface {
	Get(key []byte) ([]byte, error) // persist.ErrNotFound when absent
	Put(kvs ...persist.KV) error
	Scan(prefix []byte, fn func(key, value []byte) error) error
	DeleteRange(start, end []byte) error
}

// RecordPrefix begins every record's key. A store may keep a filter of the
// keys under it: nearly every Begin looks up a key never stored.
const RecordPrefix = "idem/r/"

const (
	indexPrefix = "idem/x/"
	// bucketWidth is the expiry index's time step. Records live at least
	// the TTL and at most one width longer.
	bucketWidth = 10 * time.Minute
	// staleReservation is how long a reservation holds when its request's
	// outcome is unknown (see Keep); past it another request may take the
	// key over. It is well above the actors' request timeout, so the write
	// has landed or been dropped by then.
	staleReservation = 2 * time.Minute
)

// Keeper keeps the records of one store.
type Keeper struct {
	store   Store
	ttl     time.Duration
	now     func() time.Time
	running sync.Map // record key → time reserved
}

// New returns a Keeper that keeps records for ttl. It drops records of the
// layout before the expiry index (idem/<ws>/...), which it cannot sweep;
// on a full disk, which refuses even that write, they are left to the next
// start (nothing reads them), so that the server starts and serves reads.
func New(store Store, ttl time.Duration, now func() time.Time) (*Keeper, error) {
	for _, r := range [][2]string{{"idem/a", "idem/r"}, {"idem/s", "idem/x"}} {
		err := store.DeleteRange([]byte(r[0]), []byte(r[1]))
		if errors.Is(err, persist.ErrStorageFull) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("idempotency: drop old records: %w", err)
		}
	}
	return &Keeper{store: store, ttl: ttl, now: now}, nil
}

// Record is a stored first response.
type Record struct {
	Status    int
	RequestID string
	Body      []byte
	bodyHash  [32]byte
	at        time.Time
}

// Reservation is a key held by the request now running under it.
type Reservation struct {
	key      []byte // record key
	bodyHash [32]byte
	keep     bool
}

// CheckKey reports whether key is an Idempotency-Key: 1-200 printable ASCII
// characters without spaces.
func CheckKey(key string) error {
	if !keyPattern.MatchString(key) {
		return field.Errorf("Idempotency-Key", "must be 1-200 printable ASCII characters without spaces")
	}
	return nil
}

// Begin starts a keyed request: it returns the stored response to replay,
// or reserves the key for this request (end it with Release or Keep).
func (k *Keeper) Begin(ws, scope, key string, body []byte) (*Record, *Reservation, error) {
	if err := CheckKey(key); err != nil {
		return nil, nil, err
	}
	res := &Reservation{key: recordKey(ws, scope, key), bodyHash: sha256.Sum256(body)}
	now := time.Now()
	prev, busy := k.running.LoadOrStore(string(res.key), now)
	if busy && now.Sub(prev.(time.Time)) > staleReservation {
		busy = !k.running.CompareAndSwap(string(res.key), prev, now)
	}
	// Look for a record after reserving, so a first request that finishes
	// in between is seen rather than run again.
	stored, err := k.store.Get(res.key)
	if err == nil && k.expired(stored) {
		// Not swept yet (sweeps go a bucket at a time), but past the TTL:
		// deleted now, so the key is free for this request's record.
		if err = k.store.Put(persist.KV{Key: res.key}); err == nil {
			err = persist.ErrNotFound
		}
	}
	switch {
	case err == nil:
		if !busy {
			k.running.Delete(string(res.key))
		}
		rec, err := decodeRecord(stored)
		if err != nil {
			return nil, nil, err
		}
		if rec.bodyHash != res.bodyHash {
			return nil, nil, ErrKeyReused
		}
		return &rec, nil, nil
	case !errors.Is(err, persist.ErrNotFound):
		if !busy {
			k.running.Delete(string(res.key))
		}
		return nil, nil, err
	case busy:
		return nil, nil, ErrInProgress
	}
	return nil, res, nil
}

// Lookup returns the live record of key under scope, if any, without
// reserving anything: ErrKeyReused if it answers another body, nil if there
// is none.
func (k *Keeper) Lookup(ws, scope, key string, body []byte) (*Record, error) {
	stored, err := k.store.Get(recordKey(ws, scope, key))
	switch {
	case errors.Is(err, persist.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case k.expired(stored):
		return nil, nil
	}
	rec, err := decodeRecord(stored)
	if err != nil {
		return nil, err
	}
	if rec.bodyHash != sha256.Sum256(body) {
		return nil, ErrKeyReused
	}
	return &rec, nil
}

// expired reports whether a stored record is older than the TTL.
func (k *Keeper) expired(stored []byte) bool {
	rec, err := decodeRecord(stored)
	return err == nil && rec.at.Before(k.now().Add(-k.ttl))
}

// Records returns the entries that store rec as res's record: write them
// atomically with the write the record answers.
func (k *Keeper) Records(res *Reservation, rec Record) []persist.KV {
	rec.bodyHash, rec.at = res.bodyHash, k.now()
	return []persist.KV{
		// Unique: a cluster claims the key before the write and confirms it
		// after, so a retry never finds the key free while a write it
		// would repeat may have landed (jslog.Store).
		{Key: res.key, Value: encodeRecord(rec), Unique: true},
		{Key: indexKey(rec.at, res.key), Value: []byte{}},
	}
}

// Store stores rec as res's record (a synced write).
func (k *Keeper) Store(res *Reservation, rec Record) error {
	return k.store.Put(k.Records(res, rec)...)
}

// Release ends the reservation: the record is stored, or the outcome is
// not to be recorded (a 5xx may be retried).
func (k *Keeper) Release(res *Reservation) {
	if !res.keep {
		k.running.Delete(string(res.key))
	}
}

// Keep leaves the key reserved: the request's outcome is not known (a
// write that may still land), so a retry must not run it again. The
// reservation goes stale after staleReservation.
func (k *Keeper) Keep(res *Reservation) { res.keep = true }

// Sweep deletes the records older than the TTL, whole expiry buckets at a
// time.
func (k *Keeper) Sweep() error {
	cut := bucketOf(k.now().Add(-k.ttl)) // buckets below cut have expired
	first, ok, err := k.oldestBucket()
	if err != nil || !ok || first >= cut {
		return err
	}
	var records []persist.KV
	for b := first; b < cut; b++ {
		err := k.store.Scan(bucketPrefix(b), func(key, _ []byte) error {
			rk := key[len(bucketPrefix(b)):]
			// A record rewritten later (a stale reservation taken over)
			// is younger than its old index entry: keep it.
			if v, err := k.store.Get(rk); err == nil {
				if rec, err := decodeRecord(v); err == nil && bucketOf(rec.at) >= cut {
					return nil
				}
			}
			records = append(records, persist.KV{Key: append([]byte(nil), rk...)})
			return nil
		})
		if err != nil {
			return fmt.Errorf("idempotency sweep: %w", err)
		}
	}
	for len(records) > 0 {
		n := min(len(records), 1000)
		if err := k.store.Put(records[:n]...); err != nil {
			return fmt.Errorf("idempotency sweep: %w", err)
		}
		records = records[n:]
	}
	if err := k.store.DeleteRange(bucketPrefix(first), bucketPrefix(cut)); err != nil {
		return fmt.Errorf("idempotency sweep: %w", err)
	}
	return nil
}

var errStop = errors.New("stop")

// oldestBucket finds the first bucket of the index with one seek.
func (k *Keeper) oldestBucket() (uint64, bool, error) {
	var (
		b     uint64
		found bool
	)
	err := k.store.Scan([]byte(indexPrefix), func(key, _ []byte) error {
		raw, err := hex.DecodeString(string(key[len(indexPrefix) : len(indexPrefix)+16]))
		if err == nil && len(raw) == 8 {
			b, found = binary.BigEndian.Uint64(raw), true
		}
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, false, err
	}
	return b, found, nil
}

// Run sweeps every interval until stop is closed; failures go to report.
func (k *Keeper) Run(interval time.Duration, stop <-chan struct{}, report func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if err := k.Sweep(); err != nil {
				report(err)
			}
		}
	}
}

func recordKey(ws, scope, key string) []byte {
	h := sha256.Sum256([]byte(scope))
	return []byte(RecordPrefix + ws + "/" + hex.EncodeToString(h[:12]) + "/" + key)
}

func bucketOf(t time.Time) uint64 { return uint64(t.UnixNano() / int64(bucketWidth)) }

func bucketPrefix(b uint64) []byte { return fmt.Appendf(nil, "%s%016x/", indexPrefix, b) }

func indexKey(at time.Time, recordKey []byte) []byte {
	return append(bucketPrefix(bucketOf(at)), recordKey...)
}

// encodeRecord: status (2) | body hash (32) | unix nanos (8) | len(reqID) (1) | reqID | body.
func encodeRecord(r Record) []byte {
	b := make([]byte, 0, 43+len(r.RequestID)+len(r.Body))
	b = binary.BigEndian.AppendUint16(b, uint16(r.Status))
	b = append(b, r.bodyHash[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(r.at.UnixNano()))
	b = append(b, byte(len(r.RequestID)))
	b = append(b, r.RequestID...)
	return append(b, r.Body...)
}

func decodeRecord(b []byte) (Record, error) {
	if len(b) < 43 || len(b) < 43+int(b[42]) {
		return Record{}, fmt.Errorf("idempotency record of %d bytes: %w", len(b), persist.ErrCorrupt)
	}
	var r Record
	r.Status = int(binary.BigEndian.Uint16(b))
	copy(r.bodyHash[:], b[2:34])
	r.at = time.Unix(0, int64(binary.BigEndian.Uint64(b[34:42])))
	n := int(b[42])
	r.RequestID = string(b[43 : 43+n])
	r.Body = b[43+n:]
	return r, nil
}
