// Package jslog keeps a Plaudit cluster's event log on NATS JetStream: one
// replicated stream per partition, written only by the partition's owner
// and fenced against any other writer.
//
// # Layout
//
// Partition p's stream is PLAUDIT_LOG_<p>, with subjects plaudit.log.<p>.>.
// Each message is one persist.Batch of one agent, on plaudit.log.<p>.<agent>
// (record.go has its body); fences are on plaudit.log.<p>._fence, their body
// the owner's epoch as 8 bytes big-endian.
//
// # Fencing
//
// Every write carries JetStream's expected last sequence of the stream: the
// sequence of the writer's own previous write. An owner starts writing by
// fencing (Fence): it appends a fence record with its epoch after the
// stream's last message, unless a fence of a higher epoch is already there.
// From then on the writes of any earlier owner fail (the stream's last
// sequence is no longer theirs), and the new owner reads every agent it
// loads from the log after its fence, so it sees every write that was
// acknowledged before. A write that fails this way fences the Log for good:
// its owner must give the partition up.
package jslog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/internal/jserr"
	"github.com/plaudit/plaudit/internal/token"
	"github.com/plaudit/plaudit/persist"
)

// ErrFenced is returned by writes to a Log that another writer has fenced
// off (a newer owner of the partition), and by Fence when a newer owner's
// fence is already in the log. It wraps persist.ErrMoved.
var ErrFenced = fmt.Errorf("jslog: fenced by a newer owner: %w", persist.ErrMoved)

// Config is a partition log's stream settings.
type Config struct {
	Replicas int // copies of the stream (3 in a cluster of three or more)
	// Duplicates is JetStream's deduplication window for message ids
	// (zero: LogDuplicates).
	Duplicates time.Duration
	// OnFenced, if set, is called on a goroutine of its own when a write
	// fences the Log: it found another writer's message where its own was
	// to go. It is called once, until a Fence opens the Log again. Its
	// owner must give the partition up: a newer owner holds it, or the log
	// holds a write this Log cannot tell for its own, and either way only
	// a fresh fence can write it again.
	OnFenced func()
}

// LogDuplicates is a partition log's deduplication window by default.
// A write's tries, which carry the same message ids, span at most its
// deadline (10 s, Agents' Timeout). A try after one that was stored is
// answered as its duplicate within the window; after it, it is refused as
// not the last write, and writeGroup tells the stored one for its own by
// reading the log, as settleAppend does an append left unanswered. A
// stream's servers keep every id for the window, about 130 bytes each.
const LogDuplicates = 30 * time.Second

// StreamName is the stream of partition p.
func StreamName(p int) string { return "PLAUDIT_LOG_" + strconv.Itoa(p) }

func subjectPrefix(p int) string { return "plaudit.log." + strconv.Itoa(p) + "." }

// fenceToken is the last subject token of fence records; no agent id may
// take it (ValidAgent refuses a leading '_').
const fenceToken = "_fence"

// Log is the event log of one partition, as its current owner writes it.
// Its methods are safe for concurrent use. Writes are stored in the order
// they are made; those made while one is out go together as the next
// group (group.go).
type Log struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	p      int
	prefix string

	onFenced func()

	mu      sync.Mutex
	last    uint64 // the stream's last sequence: this Log's own last write
	epoch   uint64 // 0 until Fence
	fenced  error  // set once a write found another writer's message
	unsure  []sent // groups sent after last, unanswered (group.go)
	queue   []*write
	leading bool // a group is being written
}

// Open opens partition p's stream, creating it if it does not exist, and
// returns its Log, which must Fence before it writes.
func Open(ctx context.Context, js jetstream.JetStream, p int, cfg Config) (*Log, error) {
	prefix := subjectPrefix(p)
	if cfg.Duplicates <= 0 {
		cfg.Duplicates = LogDuplicates
	}
	s, err := ensureStream(ctx, js, jetstream.StreamConfig{
		Name:       StreamName(p),
		Subjects:   []string{prefix + ">"},
		Storage:    jetstream.FileStorage,
		Replicas:   max(cfg.Replicas, 1),
		Retention:  jetstream.LimitsPolicy,
		Discard:    jetstream.DiscardNew,
		Duplicates: cfg.Duplicates,
		// Writes made together go as one atomic batch (group.go).
		AllowAtomicPublish: true,
		// Reads go to the stream's leader: a direct get may be answered by
		// a follower that has not yet stored the latest acknowledged write,
		// and a new owner must read every one of them.
		AllowDirect: false,
		DenyDelete:  true,
	})
	if cur := streamConfig(s, err); cur != nil && (!cur.AllowAtomicPublish || cur.Duplicates > cfg.Duplicates) {
		// Made by an earlier version, which wrote one message at a time,
		// or kept message ids for JetStream's default 2 minutes.
		cur.AllowAtomicPublish = true
		cur.Duplicates = min(cur.Duplicates, cfg.Duplicates)
		s, err = js.UpdateStream(ctx, *cur)
	}
	if err != nil {
		return nil, fmt.Errorf("jslog: partition %d stream: %w", p, err)
	}
	return &Log{js: js, stream: s, p: p, prefix: prefix, onFenced: cfg.OnFenced}, nil
}

// streamConfig is the configuration s was opened with, or nil after err.
func streamConfig(s jetstream.Stream, err error) *jetstream.StreamConfig {
	if err != nil {
		return nil
	}
	cfg := s.CachedInfo().Config
	return &cfg
}

// ensureStream opens the stream cfg names, creating it if it does not
// exist. An existing stream is taken as it is: its settings are those it
// was created with.
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if s, err = js.CreateStream(ctx, cfg); err != nil {
			// Made meanwhile by another node, or the error stands (the
			// lookup reports it).
			s, err = js.Stream(ctx, cfg.Name)
		}
	}
	return s, err
}

// ValidAgent reports whether id can be an agent of a Log: a subject token
// of letters, digits, '-' and '_' not starting with '_'.
func ValidAgent(id string) bool { return token.Valid(id) && id[0] != '_' }

// Fence makes this Log the partition's only writer, for an owner of the
// given epoch: it appends a fence record after the stream's last message.
// If the last fence in the stream has a higher epoch, it returns ErrFenced
// (this owner was deposed before it began).
func (l *Log) Fence(ctx context.Context, epoch uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		info, err := l.stream.Info(ctx)
		if err != nil {
			return fmt.Errorf("jslog: partition %d: %w", l.p, err)
		}
		last := info.State.LastSeq
		if prev, err := l.lastFence(ctx); err != nil {
			return err
		} else if prev > epoch {
			return fmt.Errorf("%w: partition %d has a fence of epoch %d, above %d", ErrFenced, l.p, prev, epoch)
		}
		body := binary.BigEndian.AppendUint64(nil, epoch)
		ack, err := l.js.Publish(ctx, l.prefix+fenceToken, body, jetstream.WithExpectLastSequence(last),
			jetstream.WithExpectStream(StreamName(l.p)))
		if jserr.WrongLastSequence(err) {
			continue // a write landed meanwhile: look again
		}
		if err != nil {
			return fmt.Errorf("jslog: partition %d fence: %w", l.p, err)
		}
		l.last, l.epoch, l.fenced, l.unsure = ack.Sequence, epoch, nil, nil
		return nil
	}
}

// lastFence is the epoch of the stream's last fence record (0 if none).
func (l *Log) lastFence(ctx context.Context) (uint64, error) {
	m, err := l.stream.GetLastMsgForSubject(ctx, l.prefix+fenceToken)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("jslog: partition %d last fence: %w", l.p, err)
	}
	if len(m.Data) != 8 {
		return 0, fmt.Errorf("%w: partition %d fence at %d: %d bytes", persist.ErrCorrupt, l.p, m.Sequence, len(m.Data))
	}
	return binary.BigEndian.Uint64(m.Data), nil
}

// Append writes b as the next message of the stream and returns its stream
// sequence once JetStream has stored it on a majority of the stream's
// replicas (each synced when the servers run with SyncAlways, as Plaudit's
// do). It fails with ErrFenced if any other writer wrote since this Log's
// last write.
func (l *Log) Append(ctx context.Context, b persist.Batch) (uint64, error) {
	if err := validBatch(b); err != nil {
		return 0, err
	}
	if len(b.Events) == 0 {
		return 0, fmt.Errorf("%w: batch for agent %q without events", persist.ErrInvalid, b.Agent)
	}
	return l.publish(ctx, l.prefix+b.Agent, batchID(b), encodeBatch(b))
}

// batchID is b's message id: it tells b apart from any other write, should
// its ack be lost and the caller retry it.
func batchID(b persist.Batch) string { return b.Agent + ":" + strconv.FormatUint(b.First, 10) }

// Stored is a batch as the stream holds it: with its stream sequence.
type Stored struct {
	persist.Batch
	Seq uint64
}

// Tail returns agent's batches stored after stream sequence after, in
// order.
func (l *Log) Tail(ctx context.Context, agent string, after uint64) ([]Stored, error) {
	if !ValidAgent(agent) {
		return nil, fmt.Errorf("%w: agent %q", persist.ErrInvalid, agent)
	}
	var out []Stored
	for next := after + 1; ; {
		var m *jetstream.RawStreamMsg
		err := read(ctx, func(ctx context.Context) (err error) {
			m, err = l.stream.GetMsg(ctx, next, jetstream.WithGetMsgSubject(l.prefix+agent))
			return err
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("jslog: partition %d agent %s from %d: %w", l.p, agent, next, err)
		}
		b, err := decodeBatch(agent, m.Data)
		if err != nil {
			return nil, fmt.Errorf("agent %s: stream sequence %d: %w", agent, m.Sequence, err)
		}
		out = append(out, Stored{Batch: b, Seq: m.Sequence})
		next = m.Sequence + 1
	}
}

// validBatch checks what persist.Store.Append requires of b: an agent id
// the log can hold, a first sequence above 0 with room for the events after
// it, index writes with keys.
func validBatch(b persist.Batch) error {
	n := uint64(len(b.Events))
	if !ValidAgent(b.Agent) || b.First == 0 || n > 0 && b.First > math.MaxUint64-(n-1) {
		return fmt.Errorf("%w: batch for agent %q at %d with %d events", persist.ErrInvalid, b.Agent, b.First, n)
	}
	for _, kv := range b.Index {
		if len(kv.Key) == 0 {
			return fmt.Errorf("%w: batch for agent %q: an index write without a key", persist.ErrInvalid, b.Agent)
		}
		if kv.Unique && kv.Value == nil {
			return fmt.Errorf("%w: batch for agent %q: a unique key deleted", persist.ErrInvalid, b.Agent)
		}
	}
	return nil
}

// LogState is a stream's size and copies, as JetStream reports them.
type LogState struct {
	Messages, Bytes uint64
	Leader          string         // the server whose copy takes writes; "" while none does
	Replicas        []ReplicaState // the other copies
}

// ReplicaState is one follower copy of a log.
type ReplicaState struct {
	Server  string
	Current bool   // caught up with the leader
	Lag     uint64 // operations behind the leader
}

// StreamState reads the state of one of the cluster's streams: a
// partition's log (StreamName), the directory's, a bucket's.
func StreamState(ctx context.Context, js jetstream.JetStream, name string) (LogState, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return LogState{}, fmt.Errorf("jslog: stream %s: %w", name, err)
	}
	info := s.CachedInfo()
	st := LogState{Messages: info.State.Msgs, Bytes: info.State.Bytes}
	if c := info.Cluster; c != nil {
		st.Leader = c.Leader
		for _, r := range c.Replicas {
			st.Replicas = append(st.Replicas, ReplicaState{Server: r.Name, Current: r.Current, Lag: r.Lag})
		}
	}
	return st, nil
}
