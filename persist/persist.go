// Package persist defines Plaudit's durable storage: a per-agent event log with
// snapshots, and a small directory of metadata records.
//
// Each agent actor owns its agent's log. It appends batches of events with
// contiguous sequence numbers (the first is 1), periodically saves a snapshot
// of its state that covers a prefix of the log, and on start recovers with
// Load: the snapshot plus every event after it. The store checks what it can
// (checksums, contiguity) but does not arbitrate between writers: at most one
// goroutine appends to, snapshots or loads a given agent at a time, and it
// appends sequence numbers in order.
//
// Every write is synced before it returns. Implementations must let
// concurrent writers (different agents) share fsyncs rather than serialising
// them.
package persist

import (
	"errors"
	"io"
)

var (
	// ErrNotFound is returned by Get for an absent directory key.
	ErrNotFound = errors.New("persist: not found")
	// ErrCorrupt is wrapped by Load when stored data fails a checksum, a
	// sequence number is missing, or a snapshot cannot be decoded. The
	// wrapping error names the agent: "agent <id>: event <seq>: ...".
	ErrCorrupt = errors.New("persist: corrupt")
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("persist: closed")
	// ErrInvalid is returned for arguments that break the contract: an empty
	// agent id or one containing '/', a zero sequence number, an empty
	// directory key.
	ErrInvalid = errors.New("persist: invalid argument")
	// ErrStorageFull is returned by writes refused because the disk is
	// (nearly) full. Reads go on; writes resume once there is room.
	ErrStorageFull = errors.New("persist: storage full")
	// ErrFailed is wrapped by every write after the store met an error it
	// cannot recover from without a restart (a failed log write).
	ErrFailed = errors.New("persist: store failed")
	// ErrMoved is wrapped by every call for an agent that this node does
	// not serve now: in a cluster, its partition is owned by another node,
	// or is moving between nodes.
	ErrMoved = errors.New("persist: agent not served by this node")
	// ErrUnavailable is wrapped by a call a replicated store could not
	// answer in time (its stream electing a leader, a quorum lost): the
	// outcome of a write is unknown, and a retry may succeed.
	ErrUnavailable = errors.New("persist: store unavailable for now")
	// ErrExists is wrapped by an Append or a Put refused because another
	// writer holds one of its Unique keys.
	ErrExists = errors.New("persist: unique key already written")
)

// Condition is a store's fitness for writes.
type Condition struct {
	Full         bool  // writes are refused with ErrStorageFull
	FreeBytes    int64 // free space as last measured
	MinFreeBytes int64 // the free space below which the store is full
	Failed       error // non-nil once writes are fenced (wraps ErrFailed)
}

// Err is the error a write gets now: Failed, ErrStorageFull, or nil.
func (c Condition) Err() error {
	switch {
	case c.Failed != nil:
		return c.Failed
	case c.Full:
		return ErrStorageFull
	}
	return nil
}

// KV is one directory write; a nil Value deletes the key (an empty non-nil
// Value stores an empty value).
type KV struct {
	Key, Value []byte
	// Unique marks the first write of a key that must have no other (an
	// external id, a judged reward's final record). A store that several
	// nodes write (a cluster's) refuses a Put or a batch whose unique key
	// another writer holds with ErrExists, and writes nothing of it; a
	// store with one writer may leave the check to that writer (which
	// checks, under a lock, before it writes).
	Unique bool
}

// Batch is one atomic, synced append for one agent.
type Batch struct {
	// Agent is the agent id: any non-empty string without '/'.
	Agent string
	// First is the sequence number of Events[0]. An agent's sequence
	// numbers start at 1 and are contiguous across batches.
	First  uint64
	Events [][]byte
	// Index holds directory writes committed atomically with the events
	// (for example run id → agent).
	Index []KV
}

// Recovered is an agent's durable state.
type Recovered struct {
	// Snapshot is the decompressed snapshot state; nil when the agent has
	// none (non-nil, possibly empty, when it has one).
	Snapshot []byte
	// SnapshotSeq is the last event sequence the snapshot covers (0 if none).
	SnapshotSeq uint64
	// Tail holds the events after SnapshotSeq, in sequence order.
	Tail [][]byte
	// LastSeq is the sequence of the last event (SnapshotSeq if Tail is empty).
	LastSeq uint64
}

// Store is Plaudit's durable storage. All methods are safe for concurrent use;
// after Close every method returns ErrClosed. Slices passed in may be reused
// by the caller once a method returns; slices returned belong to the caller
// unless stated otherwise.
type Store interface {
	// Append writes b atomically and syncs it before returning. Concurrent
	// calls share fsyncs. The store does not compare b.First with the log:
	// the caller owns the sequence; Load reports a gap.
	Append(b Batch) error
	// SaveSnapshot stores what state writes as agent's snapshot covering
	// events ≤ seq and, in the same synced batch, trims those events from
	// the log. A snapshot older than the stored one (lower seq) is
	// ignored, so a delayed save cannot roll the agent back behind trimmed
	// events; one at the same seq replaces it. seq must not exceed the
	// last acknowledged event. state is written once, before the store
	// writes anything; its error fails the save.
	SaveSnapshot(agent string, seq uint64, state State) error
	// Load returns agent's snapshot and log tail. A torn final record
	// (checksum mismatch on the last event) that was never acknowledged is
	// dropped and deleted, so the next Append reuses its sequence; any
	// other bad record, a sequence gap, a log that ends before an event
	// that was acknowledged, or a corrupt snapshot is an error wrapping
	// ErrCorrupt that names the agent. An agent with nothing stored
	// returns a zero Recovered.
	Load(agent string) (Recovered, error)
	// Get reads a directory key (ErrNotFound if absent).
	Get(key []byte) ([]byte, error)
	// Put writes directory entries atomically and syncs.
	Put(kvs ...KV) error
	// DeleteRange deletes the directory keys in [start, end), atomically,
	// and syncs. It touches no log or snapshot.
	DeleteRange(start, end []byte) error
	// Scan calls fn for every directory key with the prefix, in key order;
	// the slices are only valid during fn. An error from fn stops the scan
	// and is returned.
	Scan(prefix []byte, fn func(key, value []byte) error) error
	// Condition reports whether writes are being refused and why.
	Condition() Condition
	// Close releases the store. Calling it again returns ErrClosed.
	Close() error
}

// State is a snapshot's state as a store takes it: written out in order,
// into the store's compressor, rather than held whole.
type State interface {
	WriteTo(w io.Writer) (int64, error)
}

// Bytes is a State held whole.
type Bytes []byte

// WriteTo implements State.
func (b Bytes) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b)
	return int64(n), err
}
