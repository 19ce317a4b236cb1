package judging

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/engine/judge"
	"github.com/plaudit/plaudit/internal/jsonw"
)

// JudgeFunc sends one judge request, data, to the workers of workspace ws
// serving subject (plaudit.judge.<ws>.<subject>) and returns the reply, or
// an error (no responders, a timeout…) after at most timeout.
type JudgeFunc func(ws, subject string, data []byte, timeout time.Duration) ([]byte, error)

// DispatchConfig configures a Dispatcher; zero fields take defaults.
type DispatchConfig struct {
	Judge JudgeFunc // nil: every judge request fails (the reward fails at its deadline)
	// Deadline bounds how long a pending reward's judges are asked, from
	// its creation or, after a restart, from its resumption (30s). One
	// request to a judge gets at most a third of it (attemptShare), so
	// one that times out is asked again, likely of another worker.
	Deadline time.Duration
	// Episode appends a scored reward's judge.* signals to one episode, its
	// own or one linked to it (LinkEpisode), idempotently (dedup keys): it
	// may be called again for the same signals after a crash. nil: nothing
	// is appended.
	Episode func(EpisodeSignals) error
	// Owns reports whether this node judges r now: in a cluster, whether
	// it serves r's task. A reward not owned is not started, and one that
	// stops being owned while its judges are asked is dropped before its
	// next write. nil: every reward is owned.
	Owns   func(Reward) bool
	Logger *slog.Logger
}

// Backoff of a judge request that failed or answered unscorable.
const (
	backoffFirst = 50 * time.Millisecond
	backoffMax   = 2 * time.Second
	// unscorableRetries is how many times an unscorable answer is asked
	// again before the criterion is Unscorable.
	unscorableRetries = 3
	// attemptShare: one judge request waits at most Deadline/attemptShare
	// for its reply.
	attemptShare = 3
)

// ErrClosed: the dispatcher has stopped; the reward stays as it is on disk.
// errNotOwned: the reward's task moved to another node, which resumes it.
var (
	ErrClosed   = errors.New("judging: dispatcher closed")
	errNotOwned = errors.New("judging: the reward's task is served by another node now")
)

// Dispatcher asks the model judges of pending rewards, one goroutine per
// reward, outside every actor mailbox, and stores each reward once it is
// final. It records each judge's outcome as it comes, so a reward resumed
// after a restart asks only the judges that had not answered.
type Dispatcher struct {
	j   *Judging
	cfg DispatchConfig

	mu      sync.Mutex
	closed  bool
	waiters map[string]chan struct{} // "<ws>/<rw id>" → closed when the reward turns final
	inHand  map[string]bool          // "<ws>/<rw id>" of the rewards started and not done
	stop    chan struct{}
	waitEnd chan struct{} // closed by EndWaits: every Wait answers what it has
	ended   bool
	writes  sync.WaitGroup // store and actor writes in progress; Close waits for them
	workers sync.WaitGroup // reward goroutines, for tests that want them gone
}

// NewDispatcher returns a dispatcher over j's rewards; Resume starts the
// open ones found on disk.
func NewDispatcher(j *Judging, cfg DispatchConfig) *Dispatcher {
	if cfg.Deadline <= 0 {
		cfg.Deadline = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Owns == nil {
		cfg.Owns = func(Reward) bool { return true }
	}
	return &Dispatcher{j: j, cfg: cfg, waiters: map[string]chan struct{}{}, inHand: map[string]bool{},
		stop: make(chan struct{}), waitEnd: make(chan struct{})}
}

// Resume restarts every open reward of every workspace that this node
// owns and does not have in hand: pending ones get their remaining judges
// asked (with a fresh deadline), scored ones their episode signals
// appended.
func (d *Dispatcher) Resume() error {
	open, err := d.j.openRewards()
	for _, r := range open {
		d.Start(r)
	}
	// Links whose reward was final before they were settled (a stop in
	// between); those of a pending reward are its dispatcher's.
	linked, lerr := d.j.linkedRewards()
	for _, r := range linked {
		if r.Final() && d.cfg.Owns(r) {
			if err := d.SettleLinks(r); err != nil && !errors.Is(err, ErrClosed) {
				lerr = errors.Join(lerr, fmt.Errorf("reward %s: %w", r.ID, err))
			}
		}
	}
	return errors.Join(err, lerr)
}

// Start takes an open reward this node owns in hand, unless it is already:
// it asks a pending one's judges, appends a scored one's episode signals.
// It returns at once.
func (d *Dispatcher) Start(r Reward) {
	if !d.cfg.Owns(r) {
		return
	}
	key := r.Workspace + "/" + r.ID
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || !r.open() || d.inHand[key] {
		return
	}
	d.inHand[key] = true
	d.workers.Add(1)
	go func() {
		defer d.workers.Done()
		defer func() {
			d.mu.Lock()
			delete(d.inHand, key)
			d.mu.Unlock()
		}()
		if r.Status == StatusPending {
			var err error
			if r, err = d.score(r); err != nil {
				if errors.Is(err, errNotOwned) {
					d.cfg.Logger.Info("judged reward left to its task's new node", "reward", r.ID)
				} else if !errors.Is(err, ErrClosed) {
					d.cfg.Logger.Error("judged reward not stored; it is resumed at the next start", "reward", r.ID, "err", err)
				}
				return
			}
		}
		d.Settle(r)
	}()
}

// Settle appends a final reward's episode signals, to its own episode if it
// has any still to append (and closes the reward) and to the episodes
// linked to it (see SettleLinks). A failure is logged; what was not
// appended is tried again at the next Resume.
func (d *Dispatcher) Settle(r Reward) {
	if r.SignalsPending && d.cfg.Episode != nil {
		err := d.write(func() error {
			if err := d.cfg.Episode(r.episodeSignals(r.EpisodeID, r.EpisodeAgent)); err != nil {
				return err
			}
			r.SignalsPending = false
			return d.j.putReward(r)
		})
		if err != nil && !errors.Is(err, ErrClosed) {
			d.cfg.Logger.Warn("judge signals not appended to the episode; retried at the next start",
				"reward", r.ID, "episode", r.EpisodeID, "err", err)
		}
	}
	if err := d.SettleLinks(r); err != nil && !errors.Is(err, ErrClosed) {
		d.cfg.Logger.Warn("judge signals not appended to a linked episode; retried at the next start",
			"reward", r.ID, "err", err)
	}
}

// SettleLinks appends a final reward's signals to each episode linked to it
// and drops each link once its signals are in (a failed reward's links are
// dropped: it has no scores to give). A pending reward is left alone: its
// dispatcher settles its links once it is final. Appending is idempotent,
// so the request that linked an episode and the dispatcher may both do it.
func (d *Dispatcher) SettleLinks(r Reward) error {
	if !r.Final() {
		return nil
	}
	return d.write(func() error {
		links, err := d.j.links(r.Workspace, r.ID)
		if err != nil {
			return err
		}
		for _, l := range links {
			if r.Status == StatusScored && d.cfg.Episode != nil {
				if err := d.cfg.Episode(r.episodeSignals(l.run, l.agent)); err != nil {
					return fmt.Errorf("episode %s: %w", l.run, err)
				}
			}
			if err := d.j.unlink(r.Workspace, r.ID, l.run); err != nil {
				return err
			}
		}
		return nil
	})
}

// write runs fn unless the dispatcher is closed; Close waits for it.
func (d *Dispatcher) write(fn func() error) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	d.writes.Add(1)
	d.mu.Unlock()
	defer d.writes.Done()
	return fn()
}

// score asks r's pending judges, stores r final and wakes its waiters.
func (d *Dispatcher) score(r Reward) (Reward, error) {
	now := d.j.now
	tv, err := d.j.TaskVersion(r.Workspace, r.TaskID, r.TaskVersion)
	var jv JudgeVersion
	if err == nil {
		jv, err = d.j.JudgeVersion(r.Workspace, r.JudgeVersion)
	}
	if err != nil {
		d.cfg.Logger.Error("judged reward: versions unreadable", "reward", r.ID, "err", err)
		r.fail(FailureInfra, now().UTC())
		return d.finish(r)
	}
	if len(r.Outcomes) != len(tv.Task.Criteria) {
		r.Outcomes, _ = tv.Task.Prepare(r.Answer)
	}
	until := time.Now().Add(d.cfg.Deadline)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i, c := range tv.Task.Criteria {
		if !c.Check.IsJudge() || r.Outcomes[i] != judge.Pending {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := d.ask(r, tv.Task, jv, i, until)
			if o == judge.Pending {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			r.Outcomes[i] = o
			// Progress is saved so a restart asks only the rest; a lost
			// save costs only a repeated question. Not by a node the
			// reward's task has left: the new one's record is the one.
			if !d.cfg.Owns(r) {
				return
			}
			if err := d.write(func() error { return d.j.putReward(r) }); err != nil && !errors.Is(err, ErrClosed) {
				d.cfg.Logger.Warn("judged reward progress not stored", "reward", r.ID, "err", err)
			}
		}()
	}
	wg.Wait()
	select {
	case <-d.stop:
		return r, ErrClosed
	default:
	}
	for _, o := range r.Outcomes {
		if o == judge.Pending {
			r.fail(FailureJudgeError, now().UTC())
			return d.finish(r)
		}
	}
	r.score(tv.Task, now().UTC())
	return d.finish(r)
}

// finish stores a final r and wakes its waiters; r is the reward as
// stored, another node's if that one finished it first.
func (d *Dispatcher) finish(r Reward) (Reward, error) {
	if !d.cfg.Owns(r) {
		return r, errNotOwned
	}
	err := d.write(func() (err error) {
		r, err = d.j.finishReward(r)
		return err
	})
	if err != nil {
		return r, err
	}
	d.mu.Lock()
	if ch, ok := d.waiters[r.Workspace+"/"+r.ID]; ok {
		close(ch)
		delete(d.waiters, r.Workspace+"/"+r.ID)
	}
	d.mu.Unlock()
	return r, nil
}

// ask asks criterion i's judge until it answers met or not met, until it
// has answered unscorable 1+unscorableRetries times (Unscorable), or until
// the deadline (Pending when it never answered, Unscorable when it only
// answered unscorable). Errors, timeouts and malformed answers are retried
// with capped exponential backoff.
func (d *Dispatcher) ask(r Reward, t judge.Task, jv JudgeVersion, i int, until time.Time) judge.Outcome {
	c := t.Criteria[i]
	subject := jv.Subject(c.Check.Judge)
	req := judgeRequest(t, i, r.Answer)
	backoff, unscorable := backoffFirst, 0
	for {
		left := time.Until(until)
		if left <= 0 {
			break
		}
		if d.cfg.Judge != nil {
			reply, err := d.cfg.Judge(r.Workspace, subject, req, min(left, d.cfg.Deadline/attemptShare))
			switch met, unsc, perr := parseVerdict(reply); {
			case err != nil:
				d.cfg.Logger.Debug("judge request failed", "reward", r.ID, "subject", subject, "err", err)
			case perr != nil:
				d.cfg.Logger.Warn("judge answered malformed JSON", "reward", r.ID, "subject", subject, "err", perr)
			case !unsc && met:
				return judge.Met
			case !unsc:
				return judge.NotMet
			default:
				if unscorable++; unscorable > unscorableRetries {
					return judge.Unscorable
				}
			}
		}
		wait := min(backoff, time.Until(until)) + rand.N(backoff/4+1)
		backoff = min(2*backoff, backoffMax)
		tm := time.NewTimer(wait)
		select {
		case <-d.stop:
			tm.Stop()
			return judge.Pending
		case <-tm.C:
		}
	}
	if unscorable > 0 {
		return judge.Unscorable
	}
	return judge.Pending
}

// judgeRequest is {"task": <canonical task>, "criterion": <criterion>, "answer"}.
func judgeRequest(t judge.Task, i int, answer string) []byte {
	b := []byte{'{'}
	b = jsonw.Key(b, "task")
	b = t.AppendJSON(b)
	b = jsonw.Key(b, "criterion")
	b = t.Criteria[i].AppendJSON(b)
	b = jsonw.Key(b, "answer")
	b = jsonw.String(b, answer)
	return append(b, '}')
}

// parseVerdict reads {"met": bool} or {"unscorable": true}.
func parseVerdict(reply []byte) (met, unscorable bool, err error) {
	v, err := fastjson.ParseBytes(reply)
	if err != nil {
		return false, false, err
	}
	if u := v.Get("unscorable"); u != nil && u.Type() == fastjson.TypeTrue {
		return false, true, nil
	}
	switch m := v.Get("met"); {
	case m == nil:
		return false, false, errors.New(`no "met"`)
	case m.Type() == fastjson.TypeTrue:
		return true, false, nil
	case m.Type() == fastjson.TypeFalse:
		return false, false, nil
	}
	return false, false, errors.New(`"met" is not a boolean`)
}

// Wait returns reward rewardID of ws once it is final or after timeout,
// whichever comes first (or at Close).
func (d *Dispatcher) Wait(ws, rewardID string, timeout time.Duration) (Reward, error) {
	// Register before reading: a reward that turns final after the read
	// closes the channel registered here.
	key := ws + "/" + rewardID
	d.mu.Lock()
	ch, ok := d.waiters[key]
	if !ok {
		ch = make(chan struct{})
		d.waiters[key] = ch
	}
	d.mu.Unlock()
	r, err := d.j.Reward(ws, rewardID)
	if err != nil || r.Final() {
		// No finish can come for it now, so no waiter needs the channel:
		// any other one registered it after the reward turned final, and
		// reads it final too.
		d.mu.Lock()
		if d.waiters[key] == ch {
			delete(d.waiters, key)
		}
		d.mu.Unlock()
		return r, err
	}
	if timeout <= 0 {
		return r, nil
	}
	tm := time.NewTimer(timeout)
	defer tm.Stop()
	// A reward another node finishes (in a cluster, its task moved there
	// meanwhile) closes no channel here: it is read again now and then.
	poll := time.NewTicker(waitPoll)
	defer poll.Stop()
	for {
		select {
		case <-ch:
		case <-tm.C:
		case <-d.stop:
		case <-d.waitEnd:
		case <-poll.C:
			if r, err := d.j.Reward(ws, rewardID); err != nil || !r.Final() {
				continue
			}
		}
		return d.j.Reward(ws, rewardID)
	}
}

// waitPoll is how often Wait reads a reward it waits for again.
const waitPoll = time.Second

// EndWaits makes every Wait, and every one to come, answer the reward as it
// stands (pending, 202), without waiting: a server draining does not hold
// its shutdown for a Prefer: wait of up to two minutes. Rewards go on
// being judged until Close.
func (d *Dispatcher) EndWaits() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.ended {
		d.ended = true
		close(d.waitEnd)
	}
}

// Close stops the dispatcher: goroutines waiting (backoff, Wait) return,
// writes in progress finish, and nothing more is written; pending rewards
// stay pending on disk for Resume. A judge request in flight is not
// interrupted; its goroutine exits, writing nothing, when it returns.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	close(d.stop)
	d.mu.Unlock()
	d.writes.Wait()
}
