package jslog

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

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
	after, unsure, err := l.last, l.unsure, l.fenced
	l.mu.Unlock()

	if err == nil {
		after, err = l.writeGroup(ctx, after, unsure, group)
	}

	l.mu.Lock()
	if after != l.last { // an unsure group was found stored
		l.last, l.unsure = after, nil
	}
	switch {
	case err == nil:
		l.last, l.unsure = after+uint64(n), nil
	case errors.Is(err, ErrFenced):
		if l.fenced == nil && l.onFenced != nil {
			go l.onFenced()
		}
		l.fenced = err
	default:
		// Unanswered, it may yet be stored right after l.last.
		l.unsure = append(l.unsure, sentOf(group))
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

// settle makes sure that none of this Log's unanswered writes can still be
// stored, so that a read after it sees every write of this Log the stream
// will ever hold. An agent whose append went unanswered is loaded again
// before it writes: had the load missed that append, stored a moment
// later, the agent's next batch would take the same event numbers again.
// With writes unanswered, settle writes the owner's fence again after the
// Log's last write. Each unanswered write expected that very place, so
// once the fence or one of them holds it, none of the others can be
// stored.
func (l *Log) settle(ctx context.Context) error {
	l.mu.Lock()
	unsure, epoch := len(l.unsure) > 0, l.epoch
	l.mu.Unlock()
	if !unsure {
		return nil
	}
	_, err := l.publish(ctx, l.prefix+fenceToken, "fence:"+rand.Text(), binary.BigEndian.AppendUint64(nil, epoch))
	return err
}

// msgRef names a write in the stream: its subject and message id.
type msgRef struct{ subject, id string }

// sent is a group as the stream would hold it: its first and last writes,
// and how many it has.
type sent struct {
	first, last msgRef
	n           int
}

func sentOf(group []*write) sent {
	first, last := group[0], group[len(group)-1]
	return sent{msgRef{first.subject, first.id}, msgRef{last.subject, last.id}, len(group)}
}

// writeGroup writes group right after stream sequence after and returns
// where it went after: past after, by the groups of unsure found stored
// first. unsure lists this Log's groups sent after after whose answer never
// came (a timeout while the stream elected a leader): any one of them may
// have been stored there. It fails with ErrFenced if another writer wrote
// after it.
func (l *Log) writeGroup(ctx context.Context, after uint64, unsure []sent, group []*write) (uint64, error) {
	mine := sentOf(group)
	for {
		err := l.sendInTries(ctx, after, group)
		var apiErr *jetstream.APIError
		if err == nil {
			return after, nil
		}
		if !jserr.WrongLastSequence(err) && !(errors.As(err, &apiErr) && apiErr.ErrorCode == errDuplicateInBatch) {
			return after, fmt.Errorf("jslog: partition %d: %w", l.p, err)
		}
		// What follows after is this very group, stored by an attempt
		// whose ack was lost, an unsure group, or another writer's.
		found, next, err2 := l.storedAfter(ctx, after, append(slices.Clip(unsure), mine))
		switch {
		case err2 != nil:
			return after, fmt.Errorf("jslog: partition %d: %w (what follows %d unread: %w)", l.p, err, after, err2)
		case found == mine:
			return after, nil
		case found.n > 0:
			// An unsure group is stored: the others, sent after the same
			// place, never can be. This group goes after it.
			after, unsure = after+uint64(found.n), nil
			continue
		case jserr.WrongLastSequence(err) && next == msgRef{}:
			// Refused as not the last write, yet nothing is readable
			// after its place: the stream's leader counts a write there
			// that it has not stored yet (one of this Log's unanswered
			// writes, or a newer owner's fence). Whose it is can be told
			// once it is stored: the group is sent again shortly, and is
			// either refused again or, if that write was dropped, stored.
			if deposed, err2 := l.deposed(ctx); err2 == nil && deposed {
				return after, fmt.Errorf("%w: partition %d: a newer owner's fence is in the log", ErrFenced, l.p)
			}
			select {
			case <-ctx.Done():
				return after, fmt.Errorf("jslog: partition %d: %w (nothing readable after %d)", l.p, err, after)
			case <-time.After(unreadableWait):
			}
			continue
		case jserr.WrongLastSequence(err):
			return after, fmt.Errorf("%w: partition %d: another writer wrote after %d (%s, message id %q)",
				ErrFenced, l.p, after, next.subject, next.id)
		}
		return after, fmt.Errorf("jslog: partition %d: %w", l.p, err)
	}
}

// unreadableWait is how long a write refused before the write holding its
// place is readable waits to be sent again: that write is being stored.
const unreadableWait = 5 * time.Millisecond

// deposed reports whether the log's last fence is of a newer owner.
func (l *Log) deposed(ctx context.Context) (bool, error) {
	last, err := l.lastFence(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	return last > l.epoch, err
}

// storedAfter returns the one of groups the stream holds right after
// stream sequence after (zero if none), and the message it found there.
func (l *Log) storedAfter(ctx context.Context, after uint64, groups []sent) (sent, msgRef, error) {
	first, err := l.at(ctx, after+1)
	if err != nil {
		return sent{}, first, err
	}
	for _, g := range groups {
		if g.first != first {
			continue
		}
		last, err := l.at(ctx, after+uint64(g.n))
		if err != nil {
			return sent{}, first, err
		}
		if g.last == last {
			return g, first, nil
		}
	}
	return sent{}, first, nil
}

// sendInTries sends group after stream sequence after, as send does, in
// tries of sendTry (see inTries). A stream's leader that stops leading (it
// steps down, as the leaders on a stopping node's server do, or its server
// dies) drops the writes it has not stored yet, unanswered: nats-server's
// raft drains its proposals. Sent as one try of the whole deadline, such a
// write held every write of its partition up for 10 s, and then failed;
// sent again, it reaches the new leader. Sending again is safe: each try
// expects the same place and carries the same message ids, so at most one
// is stored, and a try after one that was stored is refused, or
// acknowledged as its duplicate, and writeGroup finds the stored one its
// own.
func (l *Log) sendInTries(ctx context.Context, after uint64, group []*write) error {
	_, err := inTries(ctx, sendTry, func(try context.Context) (struct{}, error) {
		return struct{}{}, l.send(try, after, group)
	})
	return err
}

// sendTry bounds one try of a write, as readTry bounds a read's: a stream
// with a leader stores and answers a write in milliseconds, and elects a
// new leader in about as long after its leader steps down.
const sendTry = time.Second

// inTries runs send, a write carrying message ids, in tries of try each
// until one is answered or ctx ends. A try that runs out of its time
// unanswered (a leader that dropped it, or none yet) is sent again; so is
// one refused because an earlier try is being stored at that moment
// (jserr.InProcess): its next try is answered as that one's duplicate, or,
// if the leader dropped it, stored. Any other answer is the write's.
func inTries[T any](ctx context.Context, try time.Duration, send func(context.Context) (T, error)) (T, error) {
	for {
		tc, cancel := context.WithTimeout(ctx, try)
		v, err := send(tc)
		ranOut := tc.Err() != nil
		cancel()
		switch {
		case err == nil || ctx.Err() != nil:
			return v, err
		case jserr.InProcess(err):
			select {
			case <-ctx.Done():
				return v, err
			case <-time.After(inProcessWait):
			}
		case ranOut && jserr.Unavailable(err):
		default:
			return v, err
		}
	}
}

// inProcessWait is how long a write waits to be sent again after a
// refusal because an earlier try of it is being stored.
const inProcessWait = 20 * time.Millisecond

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

// at names the stream's message at seq (zero if there is none).
func (l *Log) at(ctx context.Context, seq uint64) (msgRef, error) {
	m, err := l.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return msgRef{}, nil
	}
	if err != nil {
		return msgRef{}, err
	}
	return msgRef{m.Subject, m.Header.Get(jetstream.MsgIDHeader)}, nil
}
