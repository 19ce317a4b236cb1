package jslog

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/internal/jserr"
	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/compress"
)

// SnapshotBucket is the JetStream object store holding agents' snapshots,
// each named <agent>.<seq>.<random> and found through the pointer record
// its owner appended to the partition's log (on plaudit.log.<p>.<agent>.snap):
// the pointer is fenced like any write, so a deposed owner's snapshot is
// never the one an agent loads.
const SnapshotBucket = "plaudit_snapshots"

// ErrNotOwner is returned for an agent whose partition this node does not
// own (or no longer owns). It wraps persist.ErrMoved.
var ErrNotOwner = fmt.Errorf("jslog: partition not owned here: %w", persist.ErrMoved)

// pointerFormat is the first byte of a snapshot pointer record:
// format(1) seq(8 big-endian) name.
const pointerFormat = 1

// AgentsConfig configures Agents.
type AgentsConfig struct {
	Replicas int // of the snapshot bucket
	// Partition maps an agent to its partition (cluster.PartitionOf with
	// the cluster's count).
	Partition func(agent string) int
	// MaxSnapshotSize caps a decompressed snapshot (1 GiB).
	MaxSnapshotSize uint64
	// Timeout bounds each JetStream operation (10s).
	Timeout time.Duration
}

// Agents keeps the logs and snapshots of the agents of the partitions this
// node owns, on JetStream: the agent half of persist.Store for a cluster
// node (Append, Load, SaveSnapshot, with the same contract). The cluster
// gives it each partition's fenced Log when the node takes the partition
// (Own) and takes it back when the node loses it (Disown).
type Agents struct {
	cfg AgentsConfig
	js  jetstream.JetStream
	obj jetstream.ObjectStore
	enc compress.Encoders
	dec *compress.Decoder

	mu   sync.Mutex
	logs map[int]*Log
	// kept lists, per agent loaded or written here, the stream positions
	// of its batches not yet trimmed, in order, and its snapshot's object.
	kept map[string]*agentLog
}

type agentLog struct {
	batches []batchPos
	object  string // the snapshot object the last pointer names ("" if none)
	snapSeq uint64
}

// batchPos is a batch's stream sequence and the agent sequence of its last event.
type batchPos struct{ stream, last uint64 }

// NewAgents opens the snapshot bucket, creating it if it does not exist.
func NewAgents(ctx context.Context, js jetstream.JetStream, cfg AgentsConfig) (*Agents, error) {
	if cfg.Partition == nil {
		return nil, errors.New("jslog: AgentsConfig.Partition is required")
	}
	if cfg.MaxSnapshotSize == 0 {
		cfg.MaxSnapshotSize = 1 << 30
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	obj, err := js.ObjectStore(ctx, SnapshotBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obj, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: SnapshotBucket,
			Storage: jetstream.FileStorage, Replicas: max(cfg.Replicas, 1)})
		if err != nil {
			// Made meanwhile by another node, or the error stands (the
			// lookup reports it).
			obj, err = js.ObjectStore(ctx, SnapshotBucket)
		}
	}
	if err == nil { // a new owner must not wait on a paused node's copy
		if err = ReadFromLeader(ctx, js, "OBJ_"+SnapshotBucket); err == nil {
			obj, err = js.ObjectStore(ctx, SnapshotBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("jslog: snapshot bucket: %w", err)
	}
	dec, err := compress.NewDecoder(cfg.MaxSnapshotSize)
	if err != nil {
		return nil, err
	}
	return &Agents{cfg: cfg, js: js, obj: obj, dec: dec, logs: map[int]*Log{}, kept: map[string]*agentLog{}}, nil
}

// Own hands Agents partition p's fenced log.
func (a *Agents) Own(p int, l *Log) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.logs[p] = l
}

// Disown takes partition p away: its agents' calls fail with ErrNotOwner
// until it is owned again, and what was known of them is forgotten (a new
// owner may have written since).
func (a *Agents) Disown(p int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.logs, p)
	for agent := range a.kept {
		if a.cfg.Partition(agent) == p {
			delete(a.kept, agent)
		}
	}
}

// log returns the Log of agent's partition.
func (a *Agents) log(agent string) (*Log, error) {
	if !ValidAgent(agent) {
		return nil, fmt.Errorf("%w: agent %q", persist.ErrInvalid, agent)
	}
	p := a.cfg.Partition(agent)
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.logs[p]
	if l == nil {
		return nil, fmt.Errorf("agent %s: partition %d: %w", agent, p, ErrNotOwner)
	}
	return l, nil
}

func (a *Agents) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), a.cfg.Timeout)
}

// readTry bounds one try of a read. A request a stream receives while it
// has no leader (its leader died, and its copies are electing another) is
// never answered: sent as one try of the whole Timeout, a read made a
// moment before the election ended waited out all of it.
const readTry = time.Second

// read runs f in tries of readTry until it succeeds, fails for a reason
// other than JetStream being unavailable for now, or ctx ends. f must be
// safe to run again: a read.
func read(ctx context.Context, f func(context.Context) error) error {
	for {
		try, cancel := context.WithTimeout(ctx, readTry)
		err := f(try)
		cancel()
		if err == nil || !jserr.Unavailable(err) || ctx.Err() != nil {
			return err
		}
		select { // no responders is answered at once: do not spin on it
		case <-ctx.Done():
			return err
		case <-time.After(readPause):
		}
	}
}

// readPause is the pause between two tries of a read.
const readPause = 50 * time.Millisecond

// Append appends b to its partition's log (see persist.Store.Append). An
// append left unanswered (a timeout while the stream elects a leader) is
// settled at once where it can be: stored, it succeeds; certainly not, it
// fails with ErrNotStored; otherwise its outcome stays unknown.
func (a *Agents) Append(b persist.Batch) error {
	if err := validBatch(b); err != nil {
		return err
	}
	if len(b.Events) == 0 {
		return nil // nothing for the log
	}
	l, err := a.log(b.Agent)
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	seq, err := l.Append(ctx, b)
	if err != nil && !errors.Is(err, ErrFenced) {
		seq, err = a.settleAppend(l, b, err)
	}
	if err != nil {
		return fmt.Errorf("agent %s: %w", b.Agent, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := a.keptLocked(b.Agent)
	k.batches = append(k.batches, batchPos{stream: seq, last: b.First + uint64(len(b.Events)) - 1})
	return nil
}

// ErrNotStored is Append's failure for a batch whose append went
// unanswered and that the log is now certain never to hold.
var ErrNotStored = errors.New("jslog: the append went unanswered, and the log will never hold it")

// settleAppend finds out, once the Log is settled (no unanswered write of
// it can be stored any more), whether b's unanswered append is in the log:
// the agent's last batch there is b if its message id is b's (an agent
// never makes two batches with the same first event, since it is loaded
// again, settled, after an append that failed). Where that cannot be told,
// the append's own error stands.
func (a *Agents) settleAppend(l *Log, b persist.Batch, cause error) (uint64, error) {
	ctx, cancel := a.ctx()
	defer cancel()
	if err := l.settle(ctx); err != nil {
		return 0, cause
	}
	var m *jetstream.RawStreamMsg
	err := read(ctx, func(ctx context.Context) (err error) {
		m, err = l.stream.GetLastMsgForSubject(ctx, l.prefix+b.Agent)
		return err
	})
	switch {
	case err == nil && m.Header.Get(jetstream.MsgIDHeader) == batchID(b):
		return m.Sequence, nil
	case err == nil, errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, fmt.Errorf("%w (%w)", ErrNotStored, cause)
	}
	return 0, cause
}

func (a *Agents) keptLocked(agent string) *agentLog {
	k := a.kept[agent]
	if k == nil {
		k = &agentLog{}
		a.kept[agent] = k
	}
	return k
}

// Load reads agent's latest snapshot and the events after it (see
// persist.Store.Load). A gap in the events is ErrCorrupt.
func (a *Agents) Load(agent string) (persist.Recovered, error) {
	r, _, err := a.load(agent)
	return r, err
}

// load is Load, with the last batch it read, if any (see Store.Load).
func (a *Agents) load(agent string) (persist.Recovered, *Stored, error) {
	fail := func(err error) (persist.Recovered, *Stored, error) { return persist.Recovered{}, nil, err }
	l, err := a.log(agent)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := a.ctx()
	defer cancel()
	if err := l.settle(ctx); err != nil {
		return fail(fmt.Errorf("agent %s: %w", agent, err))
	}
	var r persist.Recovered
	object, err := l.lastPointer(ctx, agent, &r.SnapshotSeq)
	if err != nil {
		return fail(err)
	}
	if object != "" {
		// The bucket's stream may be electing a leader too: its object's
		// info, read in short tries, says when it has one. The object
		// itself is read in one try, however long it takes.
		err := read(ctx, func(ctx context.Context) error {
			_, err := a.obj.GetInfo(ctx, object)
			return err
		})
		var data []byte
		if err == nil {
			data, err = a.obj.GetBytes(ctx, object)
		}
		if err != nil {
			return fail(fmt.Errorf("agent %s: snapshot %s: %w", agent, object, err))
		}
		if r.Snapshot, err = a.dec.Decode(data); err != nil {
			return fail(fmt.Errorf("agent %s: snapshot %s: %v: %w", agent, object, err, persist.ErrCorrupt))
		}
	}
	stored, err := l.Tail(ctx, agent, 0)
	if err != nil {
		return fail(err)
	}
	k := &agentLog{object: object, snapSeq: r.SnapshotSeq}
	r.LastSeq = r.SnapshotSeq
	var lastBatch *Stored
	for i, s := range stored {
		lastBatch = &stored[i]
		last := s.First + uint64(len(s.Events)) - 1
		k.batches = append(k.batches, batchPos{stream: s.Seq, last: last})
		if last <= r.LastSeq {
			continue // covered by the snapshot, not trimmed yet
		}
		if s.First > r.LastSeq+1 {
			return fail(fmt.Errorf("agent %s: event %d: missing (the log goes on at %d): %w",
				agent, r.LastSeq+1, s.First, persist.ErrCorrupt))
		}
		r.Tail = append(r.Tail, s.Events[r.LastSeq+1-s.First:]...)
		r.LastSeq = last
	}
	a.mu.Lock()
	a.kept[agent] = k
	a.mu.Unlock()
	return r, lastBatch, nil
}

// logged reports whether agent's last logged batch is the one that starts
// at first and holds entry in its index, and returns it: whether the write
// that claimed entry's key for that batch reached the log. Any node can
// tell, owner of the agent's partition or not.
func (a *Agents) logged(agent string, first uint64, entry persist.KV) (Stored, bool, error) {
	if !ValidAgent(agent) {
		return Stored{}, false, fmt.Errorf("%w: agent %q", persist.ErrInvalid, agent)
	}
	ctx, cancel := a.ctx()
	defer cancel()
	p := a.cfg.Partition(agent)
	var m *jetstream.RawStreamMsg
	err := read(ctx, func(ctx context.Context) error {
		st, err := a.js.Stream(ctx, StreamName(p))
		if err != nil {
			return err
		}
		m, err = st.GetLastMsgForSubject(ctx, subjectPrefix(p)+agent)
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return Stored{}, false, nil
	case err != nil:
		return Stored{}, false, fmt.Errorf("jslog: partition %d agent %s: %w", p, agent, err)
	}
	b, err := decodeBatch(agent, m.Data)
	if err != nil {
		return Stored{}, false, fmt.Errorf("agent %s: stream sequence %d: %w", agent, m.Sequence, err)
	}
	if b.First != first {
		return Stored{}, false, nil
	}
	for _, kv := range b.Index {
		if bytes.Equal(kv.Key, entry.Key) && bytes.Equal(kv.Value, entry.Value) {
			return Stored{Batch: b, Seq: m.Sequence}, true, nil
		}
	}
	return Stored{}, false, nil
}

// SaveSnapshot stores state as agent's snapshot covering events ≤ seq and
// trims the log of what it covers (see persist.Store.SaveSnapshot): the
// object first, then its pointer in the log (fenced), then the trim, so a
// crash between leaves the older snapshot and its events in place.
func (a *Agents) SaveSnapshot(agent string, seq uint64, state persist.State) error {
	l, err := a.log(agent)
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	a.mu.Lock()
	_, known := a.kept[agent]
	a.mu.Unlock()
	if !known {
		// Not loaded here: read what the log holds (as Load would).
		if _, err := a.Load(agent); err != nil {
			return err
		}
	}
	a.mu.Lock()
	k := a.kept[agent]
	older := seq < k.snapSeq
	a.mu.Unlock()
	if older {
		return nil // older than the stored one
	}
	packed, _, err := a.enc.Append(nil, state)
	if err != nil {
		return fmt.Errorf("agent %s: snapshot: state: %w", agent, err)
	}
	name := agent + "." + strconv.FormatUint(seq, 10) + "." + rand.Text()[:10]
	if _, err := a.obj.PutBytes(ctx, name, packed); err != nil {
		return fmt.Errorf("agent %s: snapshot: %w", agent, err)
	}
	if err := l.appendPointer(ctx, agent, seq, name); err != nil {
		if errors.Is(err, ErrFenced) {
			_ = a.obj.Delete(ctx, name) // refused: no pointer names it
		}
		// Unanswered, or stored with its older pointers left, the pointer
		// may be the agent's last: deleted, its object failed every load
		// of the agent. It stays (an orphan costs space only).
		return fmt.Errorf("agent %s: snapshot: %w", agent, err)
	}
	old := k.object
	a.mu.Lock()
	k.object, k.snapSeq = name, seq
	// Trim: the batches whose events the snapshot covers, up to the first
	// it does not. Purges are not fenced, and need not be: they remove only
	// what a pointer already in the log covers.
	keep := len(k.batches)
	for i, b := range k.batches {
		if b.last > seq {
			keep = i
			break
		}
	}
	var upTo uint64 // purge stream sequences below this
	if keep < len(k.batches) {
		upTo = k.batches[keep].stream
	} else if keep > 0 {
		upTo = k.batches[keep-1].stream + 1
	}
	k.batches = append([]batchPos(nil), k.batches[keep:]...)
	a.mu.Unlock()
	if upTo > 0 {
		if err := l.stream.Purge(ctx, jetstream.WithPurgeSubject(l.prefix+agent), jetstream.WithPurgeSequence(upTo)); err != nil {
			return fmt.Errorf("agent %s: trimming the log: %w", agent, err)
		}
	}
	if old != "" && old != name {
		_ = a.obj.Delete(ctx, old) // an orphan costs space only
	}
	return nil
}

func pointerSubject(l *Log, agent string) string { return l.prefix + agent + ".snap" }

// appendPointer appends a snapshot pointer for agent (fenced).
func (l *Log) appendPointer(ctx context.Context, agent string, seq uint64, object string) error {
	body := binary.BigEndian.AppendUint64([]byte{pointerFormat}, seq)
	body = append(body, object...)
	_, err := l.publish(ctx, pointerSubject(l, agent), "snap:"+object, body)
	if err != nil {
		return err
	}
	// Older pointers are superseded: keep the last.
	return l.stream.Purge(ctx, jetstream.WithPurgeSubject(pointerSubject(l, agent)), jetstream.WithPurgeKeep(1))
}

// lastPointer reads agent's last snapshot pointer: the object's name ("" if
// none) and, into seq, the sequence it covers.
func (l *Log) lastPointer(ctx context.Context, agent string, seq *uint64) (string, error) {
	var m *jetstream.RawStreamMsg
	err := read(ctx, func(ctx context.Context) (err error) {
		m, err = l.stream.GetLastMsgForSubject(ctx, pointerSubject(l, agent))
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("agent %s: snapshot pointer: %w", agent, err)
	}
	if len(m.Data) < 10 || m.Data[0] != pointerFormat {
		return "", fmt.Errorf("agent %s: snapshot pointer at %d: %w", agent, m.Sequence, persist.ErrCorrupt)
	}
	*seq = binary.BigEndian.Uint64(m.Data[1:9])
	return string(m.Data[9:]), nil
}
