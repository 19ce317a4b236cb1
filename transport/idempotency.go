package transport

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/persist"
)

// Idempotency-Key handling, shared by every door.
//
// A key is scoped to (workspace, operation, target): the key's home
// workspace plus the method and path (HTTP) or the subject (NATS). Its
// record holds the first response, byte for byte, with its status, the
// request id it carried and a hash of the request body. For writes that
// reach an agent, the record is rendered inside the actor and written in
// the same batch as the write's events, so after any crash a retry finds
// either the record or nothing written. Other outcomes (validation errors,
// workspace and key administration) are recorded by a synced Put before the
// answer. 5xx outcomes are never recorded: they may be retried.
//
// A key whose first request is still running answers 409
// idempotency_in_progress rather than waiting, so a retry storm costs no
// goroutines; clients retry after it.

// Errors of the idempotency layer.
var (
	ErrIdempotencyKeyReused = errors.New("Idempotency-Key was used with a different request body")
	ErrIdempotencyBusy      = errors.New("a request with this Idempotency-Key is still in progress")
)

var idemKeyPattern = regexp.MustCompile(`^[\x21-\x7e]{1,200}$`)

const idemPrefix = "idem/"

// idem is the idempotency state of one call.
type idem struct {
	key      []byte   // directory key of the record
	bodyHash [32]byte // of the request body

	// state settles who owns the outcome of a write sent to an actor: the
	// actor's Render (rendered) or the door, which stopped waiting
	// (abandoned). out, outErr and recorded are written by Render before
	// it settles the state, and read by the door only after.
	state    atomic.Int32
	out      result
	outErr   error
	recorded bool // the actor put the record in the write's batch
	keep     bool // leave the key reserved: an abandoned write may still land
}

const (
	idemPending int32 = iota
	idemRendered
	idemAbandoned
)

// staleReservation is how long a reservation holds when its request was
// abandoned; past it another request may take the key over. It is well
// above the actors' request timeout, so the abandoned write has landed or
// been dropped by then.
const staleReservation = 2 * time.Minute

// idempotency tracks keys whose first request is running.
type idempotency struct {
	running sync.Map // record key → time reserved
	ttl     time.Duration
	now     func() time.Time
}

// record is a stored first response.
type record struct {
	status   int
	bodyHash [32]byte
	reqID    string
	at       time.Time
	body     []byte
}

// encodeRecord: status (2) | body hash (32) | unix nanos (8) | len(reqID) (1) | reqID | body.
func encodeRecord(r record) []byte {
	b := make([]byte, 0, 43+len(r.reqID)+len(r.body))
	b = binary.BigEndian.AppendUint16(b, uint16(r.status))
	b = append(b, r.bodyHash[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(r.at.UnixNano()))
	b = append(b, byte(len(r.reqID)))
	b = append(b, r.reqID...)
	return append(b, r.body...)
}

func decodeRecord(b []byte) (record, error) {
	if len(b) < 43 || len(b) < 43+int(b[42]) {
		return record{}, fmt.Errorf("idempotency record of %d bytes: %w", len(b), persist.ErrCorrupt)
	}
	var r record
	r.status = int(binary.BigEndian.Uint16(b))
	copy(r.bodyHash[:], b[2:34])
	r.at = time.Unix(0, int64(binary.BigEndian.Uint64(b[34:42])))
	n := int(b[42])
	r.reqID = string(b[43 : 43+n])
	r.body = b[43+n:]
	return r, nil
}

// recordKey is the directory key of a key's record in a scope.
func recordKey(ws, scope, key string) []byte {
	h := sha256.Sum256([]byte(scope))
	return []byte(idemPrefix + ws + "/" + hex.EncodeToString(h[:12]) + "/" + key)
}

// replayOrReserve starts an idempotent call: it returns a stored response to
// replay, or reserves the key for this call (release it with finish).
func (h *HTTP) replayOrReserve(c *call, scope, key string) (*record, error) {
	if !idemKeyPattern.MatchString(key) {
		return nil, field.Errorf("Idempotency-Key", "must be 1-200 printable ASCII characters without spaces")
	}
	c.idem = &idem{key: recordKey(c.p.Home, scope, key), bodyHash: sha256.Sum256(c.body)}
	now := time.Now()
	prev, busy := h.idem.running.LoadOrStore(string(c.idem.key), now)
	if busy && now.Sub(prev.(time.Time)) > staleReservation {
		busy = !h.idem.running.CompareAndSwap(string(c.idem.key), prev, now)
	}
	// Look for a record after reserving, so a first request that finishes
	// in between is seen rather than run again.
	stored, err := h.reg.DirGet(c.idem.key)
	switch {
	case err == nil:
		if !busy {
			h.idem.running.Delete(string(c.idem.key))
		}
		c.idem = nil
		rec, err := decodeRecord(stored)
		if err != nil {
			return nil, err
		}
		if rec.bodyHash != sha256.Sum256(c.body) {
			return nil, ErrIdempotencyKeyReused
		}
		return &rec, nil
	case !errors.Is(err, persist.ErrNotFound):
		if !busy {
			h.idem.running.Delete(string(c.idem.key))
		}
		c.idem = nil
		return nil, err
	case busy:
		c.idem = nil
		return nil, ErrIdempotencyBusy
	}
	return nil, nil
}

// finish records the outcome of a reserved call unless the actor already
// did, then releases the key.
func (h *HTTP) finish(c *call, res result, err error) {
	if c.idem == nil || c.idem.keep {
		return
	}
	defer h.idem.running.Delete(string(c.idem.key))
	if c.idem.recorded {
		return
	}
	if v := h.renderRecord(c, res, err); v != nil {
		if perr := h.reg.Store().Put(persist.KV{Key: c.idem.key, Value: v}); perr != nil {
			h.cfg.Logger.Error("idempotency record not stored", "request_id", c.reqID, "err", perr)
		}
	}
}

// renderRecord makes the record of an outcome, nil when it must not be
// recorded (5xx: the client may retry it).
func (h *HTTP) renderRecord(c *call, res result, err error) []byte {
	rec := record{status: res.status, body: res.body, bodyHash: c.idem.bodyHash, reqID: c.reqID, at: h.idem.now()}
	if res.record != nil {
		rec.body = res.record
	}
	if err != nil {
		f := classify(err)
		if f.status >= 500 {
			return nil
		}
		rec.status, rec.body = f.status, errorBody(f, err.Error(), c.reqID, c.rpc)
	}
	return encodeRecord(rec)
}

// write runs a write that may reach an agent: do performs it (passing the
// idempotency record request, nil without a key) and render turns its
// result into the response. With a key, render runs inside the actor and
// the record goes into the same batch as the write.
func (c *call) write(do func(*actors.Idempotent) (any, error), render func(any) (result, error)) (result, error) {
	if c.idem == nil {
		res, err := do(nil)
		if err != nil {
			return result{}, err
		}
		return render(res)
	}
	id := c.idem
	req := &actors.Idempotent{Key: id.key, Render: func(res any, err error) []byte {
		if err == nil {
			id.out, id.outErr = render(res)
		} else {
			id.outErr = err
		}
		v := c.h.renderRecord(c, id.out, id.outErr)
		id.recorded = v != nil
		id.state.CompareAndSwap(idemPending, idemRendered)
		return v
	}}
	_, err := do(req)
	if id.state.CompareAndSwap(idemPending, idemAbandoned) {
		// Render has not run. If the request never reached the agent,
		// nothing will be written; otherwise (a timeout) it may still be,
		// with its record, so the key stays reserved until it goes stale.
		id.keep = !errors.Is(err, actors.ErrOverloaded)
		return result{}, err
	}
	if err != nil && id.outErr == nil {
		id.recorded = false // the append carrying the record failed
		return result{}, err
	}
	return id.out, id.outErr
}

// sweep deletes records older than the TTL; it runs every interval until
// stop is closed.
func (h *HTTP) sweepIdempotency(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if err := h.SweepIdempotency(); err != nil {
				h.cfg.Logger.Warn("idempotency sweep", "err", err)
			}
		}
	}
}

// SweepIdempotency deletes the idempotency records older than the TTL.
func (h *HTTP) SweepIdempotency() error {
	cutoff := h.idem.now().Add(-h.idem.ttl)
	var expired []persist.KV
	err := h.reg.Store().Scan([]byte(idemPrefix), func(k, v []byte) error {
		rec, err := decodeRecord(v)
		if err != nil || rec.at.Before(cutoff) {
			expired = append(expired, persist.KV{Key: append([]byte(nil), k...)})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for len(expired) > 0 {
		n := min(len(expired), 1000)
		if err := h.reg.Store().Put(expired[:n]...); err != nil {
			return err
		}
		expired = expired[n:]
	}
	return nil
}
