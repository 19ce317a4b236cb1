package jslog

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/internal/jserr"
)

// Group commit.
//
// Every write names the stream's last sequence, so an owner cannot send a
// write before the one ahead of it is acknowledged: it would have to
// predict that one's sequence, and a deposed owner's predicted write is
// accepted when the new owner's fence happens to land at the sequence it
// predicted (the log forks). Nor can the writes name the fence subject's
// last sequence instead: a replicated stream refuses a second in-flight
// message that expects a sequence on the same subject.
//
// So the writes made while a write is out wait for it, then go together as
// the next group: one JetStream atomic batch, stored whole or not at all,
// whose first message carries the expected last sequence. One group is out
// at a time, and a group is fenced exactly as a single write is.

const (
	maxGroup      = 256     // writes in one group (JetStream takes up to 1,000)
	maxGroupBytes = 8 << 20 // their bodies, past the first write's
)

// JetStream's atomic batch headers (nats.go has no constants for them).
const (
	batchIDHeader     = "Nats-Batch-Id"
	batchSeqHeader    = "Nats-Batch-Sequence"
	batchCommitHeader = "Nats-Batch-Commit"
)

// errDuplicateInBatch is JetStream's refusal of a batch holding a message
// id it has stored before.
const errDuplicateInBatch jetstream.ErrorCode = 10201

// write is one message waiting for its place in the log.
type write struct {
	subject, id string
	body        []byte
	seq         uint64
	err         error
	// turn is sent true once the write's group is written (seq and err
	// are then set), false when its writer is to lead the next group.
	turn chan bool
}

// publish writes one message after this Log's last write and returns its
// stream sequence. A write made while another group is out waits and goes
// in the next group, led by its first write's caller (whose ctx bounds it).
func (l *Log) publish(ctx context.Context, subject, id string, body []byte) (uint64, error) {
	w := &write{subject: subject, id: id, body: body, turn: make(chan bool, 1)}
	l.mu.Lock()
	if l.epoch == 0 {
		l.mu.Unlock()
		return 0, fmt.Errorf("jslog: partition %d: write before Fence", l.p)
	}
	l.queue = append(l.queue, w)
	if l.leading {
		l.mu.Unlock()
		if <-w.turn {
			return w.seq, w.err
		}
		l.mu.Lock()
	}
	// w leads: it is the first write in the queue.
	l.leading = true
	n, size := 1, 0
	for n < len(l.queue) && n < maxGroup && size+len(l.queue[n].body) <= maxGroupBytes {
		size += len(l.queue[n].body)
		n++
	}
	group := l.queue[:n:n]
	if l.queue = l.queue[n:]; len(l.queue) == 0 {
		l.queue = nil
	}
	after, err := l.last, l.fenced
	l.mu.Unlock()

	if err == nil {
		err = l.writeGroup(ctx, after, group)
	}

	l.mu.Lock()
	switch {
	case err == nil:
		l.last = after + uint64(n)
	case errors.Is(err, ErrFenced):
		l.fenced = err
	}
	if len(l.queue) > 0 {
		l.queue[0].turn <- false
	} else {
		l.leading = false
	}
	l.mu.Unlock()
	for i, g := range group {
		if g.err = err; err == nil {
			g.seq = after + uint64(i) + 1
		}
		if g != w {
			g.turn <- true
		}
	}
	return w.seq, w.err
}

// writeGroup writes group right after stream sequence after. It fails with
// ErrFenced if another writer wrote after it.
func (l *Log) writeGroup(ctx context.Context, after uint64, group []*write) error {
	err := l.send(ctx, after, group)
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return nil
	case jserr.WrongLastSequence(err), errors.As(err, &apiErr) && apiErr.ErrorCode == errDuplicateInBatch:
		// What follows after is either this very group, stored by an
		// attempt whose ack was lost, or another writer's.
		if l.holds(ctx, after+1, group[0]) && l.holds(ctx, after+uint64(len(group)), group[len(group)-1]) {
			return nil
		}
		if jserr.WrongLastSequence(err) {
			return fmt.Errorf("%w: partition %d: another writer wrote after %d", ErrFenced, l.p, after)
		}
	}
	return fmt.Errorf("jslog: partition %d: %w", l.p, err)
}

// send publishes group after stream sequence after: one write as a plain
// publish, more as one atomic batch.
func (l *Log) send(ctx context.Context, after uint64, group []*write) error {
	stream := StreamName(l.p)
	if len(group) == 1 {
		w := group[0]
		ack, err := l.js.Publish(ctx, w.subject, w.body, jetstream.WithExpectLastSequence(after),
			jetstream.WithMsgID(w.id), jetstream.WithExpectStream(stream))
		if err != nil {
			return err
		}
		return l.acked(ack.Sequence, after, 1)
	}
	batch := rand.Text()
	for i, w := range group {
		m := nats.NewMsg(w.subject)
		m.Data = w.body
		m.Header.Set(jetstream.MsgIDHeader, w.id)
		m.Header.Set(jetstream.ExpectedStreamHeader, stream)
		m.Header.Set(batchIDHeader, batch)
		m.Header.Set(batchSeqHeader, strconv.Itoa(i+1))
		if i == 0 {
			m.Header.Set(jetstream.ExpectedLastSeqHeader, strconv.FormatUint(after, 10))
		}
		if i < len(group)-1 {
			// Staged by the stream's leader; a lost one fails the commit.
			if err := l.js.Conn().PublishMsg(m); err != nil {
				return err
			}
			continue
		}
		m.Header.Set(batchCommitHeader, "1")
		resp, err := l.js.Conn().RequestMsgWithContext(ctx, m)
		if err != nil {
			return err
		}
		var ack struct {
			jetstream.PubAck
			Error *jetstream.APIError `json:"error"`
		}
		if err := json.Unmarshal(resp.Data, &ack); err != nil {
			return fmt.Errorf("batch ack %q: %w", resp.Data, err)
		}
		if ack.Error != nil {
			return ack.Error
		}
		return l.acked(ack.Sequence, after, len(group))
	}
	return nil
}

// acked checks an acknowledgement of n writes after stream sequence
// after: the last of them must be at after+n. A duplicate of a message
// stored elsewhere is acknowledged at its first place, and the log then
// holds something other than this Log's writes.
func (l *Log) acked(seq, after uint64, n int) error {
	if seq != after+uint64(n) {
		return fmt.Errorf("%d writes after %d acknowledged at %d", n, after, seq)
	}
	return nil
}

// holds reports whether the stream's message at seq is w.
func (l *Log) holds(ctx context.Context, seq uint64, w *write) bool {
	m, err := l.stream.GetMsg(ctx, seq)
	return err == nil && m.Subject == w.subject && m.Header.Get(jetstream.MsgIDHeader) == w.id
}
