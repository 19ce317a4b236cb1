package judging

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/engine/id"
	"github.com/plaudit/plaudit/engine/judge"
	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/persist"
)

// The statuses of a reward.
const (
	StatusPending = "pending" // judges still to be asked
	StatusScored  = "scored"  // final: Scores and Flags hold the reward
	StatusFailed  = "failed"  // final: Failure says why; never reused
)

// The failure reasons of a failed reward.
const (
	FailureJudgeError = "judge_error" // no usable judge answer by the deadline
	FailureInfra      = "infra"       // the reward's task or judge version could not be read
)

// Reward is one judged answer: an answer to a task version, scored under a
// judge version.
type Reward struct {
	ID           string // "rw_" + ULID
	Workspace    string
	Status       string
	TaskID       string
	TaskVersion  string
	JudgeVersion string
	EpisodeID    string  // a run of the workspace; "" when none
	EpisodeAgent string  // the agent of EpisodeID
	ClientRef    *string // nil when absent
	Answer       string
	// Outcomes has one entry per criterion of the task version: the
	// built-ins decided at creation, the judges' as they answer.
	Outcomes  []judge.Outcome
	Scores    judge.Scores // when scored
	Flags     []string     // when scored
	Failure   string       // when failed: a Failure* reason
	CreatedAt time.Time
	ScoredAt  time.Time // zero while pending
	// SignalsPending marks a scored reward with an episode whose judge.*
	// signals are not appended yet (see Dispatcher).
	SignalsPending bool
}

// Final reports whether r is scored or failed.
func (r Reward) Final() bool { return r.Status != StatusPending }

// open reports whether r still has work to do: judges to ask or episode
// signals to append. An open reward is listed under judging/open/.
func (r Reward) open() bool { return r.Status == StatusPending || r.SignalsPending }

// NewReward is a request for a reward.
type NewReward struct {
	TaskID       string
	TaskVersion  string // "" = the pin's, else the current one
	JudgeVersion string // "" = the pin's, else the newest published
	Answer       string
	EpisodeID    string // resolved by the caller; "" when none
	EpisodeAgent string
	ClientRef    *string
}

// stripedLocks serialise the check-and-set of one key: a task's pin, an
// answer's same-answer entry. Striped: collisions only serialise.
type stripedLocks struct {
	seed  maphash.Seed
	locks [64]sync.Mutex
}

func (l *stripedLocks) lock(key string) func() {
	m := &l.locks[maphash.String(l.seed, key)%uint64(len(l.locks))]
	m.Lock()
	return m.Unlock
}

// globalRand draws from math/rand/v2's goroutine-safe global source.
type globalRand struct{}

func (globalRand) Uint64() uint64 { return rand.Uint64() }

var ids = rand.New(globalRand{})

// CreateReward returns the reward of an answer: the first one of the same
// answer to the same task version under the same judge version unless that
// one failed (created false), else a new one (created true), scored at once
// when no judge needs asking (answer flags set, or built-ins only) and
// pending otherwise; the caller hands a pending one to the Dispatcher.
//
// Versions: a named task version is used as named; else the workspace's pin
// for the task, else the task's current version. A named judge version is
// used as named; else the pin's, else the newest published. The
// workspace's first reward on a task pins the versions current then,
// whatever it named. The record, its same-answer entry and a new pin go out
// in one synced Put before CreateReward returns.
//
// Locks: a pin, once made, never changes, so only the first rewards of a
// task meet on the task's lock; after that, rewards of one task wait only
// for rewards of the same answer (and stripe collisions), and concurrent
// ones share Pebble's group commit instead of queueing behind one fsync.
func (j *Judging) CreateReward(ws string, in NewReward) (Reward, bool, error) {
	pin, pinned, err := j.pin(ws, in.TaskID)
	if err != nil {
		return Reward{}, false, err
	}
	if !pinned {
		unlock := j.pins.lock(ws + "\x00" + in.TaskID)
		defer unlock()
		if pin, pinned, err = j.pin(ws, in.TaskID); err != nil {
			return Reward{}, false, err
		}
	}
	var kvs []persist.KV
	if !pinned {
		versions, err := j.TaskVersions(ws, in.TaskID)
		if err != nil {
			return Reward{}, false, err
		}
		if len(versions) == 0 {
			return Reward{}, false, fmt.Errorf("task %s: %w", in.TaskID, engine.ErrNotFound)
		}
		jvs, err := j.JudgeVersions(ws)
		if err != nil {
			return Reward{}, false, err
		}
		pin = Pin{TaskVersion: versions[len(versions)-1].Version, JudgeVersion: jvs[len(jvs)-1].Name}
		kvs = append(kvs, persist.KV{Key: pinKey(ws, in.TaskID), Value: pin.encode()})
	}
	tvName := cmpOr(in.TaskVersion, pin.TaskVersion)
	tv, err := j.TaskVersion(ws, in.TaskID, tvName)
	if err != nil {
		return Reward{}, false, err
	}
	jv, err := j.JudgeVersion(ws, cmpOr(in.JudgeVersion, pin.JudgeVersion))
	if err != nil {
		return Reward{}, false, err
	}
	akey := answerKey(ws, tv.Version, jv.Name, in.Answer)
	unlock := j.answers.lock(string(akey))
	defer unlock()
	if v, err := j.store.Get(akey); err == nil {
		first, err := j.Reward(ws, string(v))
		if err != nil {
			return Reward{}, false, err
		}
		if first.Status != StatusFailed {
			return first, false, nil
		}
	} else if !errors.Is(err, persist.ErrNotFound) {
		return Reward{}, false, err
	}
	now := j.now().UTC()
	r := Reward{ID: id.New(id.Reward, now, ids), Workspace: ws, Status: StatusPending,
		TaskID: in.TaskID, TaskVersion: tv.Version, JudgeVersion: jv.Name,
		EpisodeID: in.EpisodeID, EpisodeAgent: in.EpisodeAgent, ClientRef: in.ClientRef,
		Answer: in.Answer, CreatedAt: now}
	outcomes, judges := tv.Task.Prepare(in.Answer)
	if err := j.checkRequests(tv.Task, judges, in.Answer); err != nil {
		return Reward{}, false, err
	}
	r.Outcomes = outcomes
	if len(judges) == 0 || len(tv.Task.AnswerFlags(in.Answer)) > 0 {
		r.score(tv.Task, now)
	}
	kvs = append(kvs, persist.KV{Key: akey, Value: []byte(r.ID)})
	if r.EpisodeID != "" {
		kvs = append(kvs, persist.KV{Key: episodeKey(ws, r.EpisodeID, r.ID), Value: []byte{}})
	}
	kvs = append(kvs, r.newRecords()...)
	if err := j.store.Put(kvs...); err != nil {
		return Reward{}, false, fmt.Errorf("put reward: %w", err)
	}
	return r, true, nil
}

// checkRequests refuses an answer whose request to one of the judges of
// t's criteria would not fit the transport: sent, it would fail until the
// deadline, and the reward with it, however often the answer came again.
// (An answer flagged is scored without a judge.)
func (j *Judging) checkRequests(t judge.Task, judges []int, answer string) error {
	if j.maxRequest <= 0 || len(judges) == 0 || len(t.AnswerFlags(answer)) > 0 {
		return nil
	}
	for _, i := range judges {
		if n := len(judgeRequest(t, i, answer)); n > j.maxRequest {
			return fmt.Errorf("%w: answer: with task %s, the request to judge criterion %s would be %d bytes, over the %d NATS carries",
				ErrJudgeRequestTooLarge, t.ID, t.Criteria[i].ID, n, j.maxRequest)
		}
	}
	return nil
}

// score makes r scored from its outcomes.
func (r *Reward) score(t judge.Task, now time.Time) {
	r.Scores, r.Flags = judge.Score(t, r.Answer, r.Outcomes)
	r.Status, r.ScoredAt = StatusScored, now
	r.SignalsPending = r.EpisodeID != ""
}

// fail makes r failed for reason.
func (r *Reward) fail(reason string, now time.Time) {
	r.Status, r.Failure, r.ScoredAt = StatusFailed, reason, now
	r.Scores, r.Flags = judge.Scores{}, nil
}

// records are the Put entries that store r: its record, its entry in its
// task's index and its open marker (deleted once it is closed).
func (r Reward) records() []persist.KV {
	kvs := r.newRecords()
	if !r.open() {
		kvs = append(kvs, persist.KV{Key: openKey(r.Workspace, r.ID)})
	}
	return kvs
}

// newRecords are the records of a reward just made: a closed one has no
// open marker to delete (a delete would still be a tombstone to write,
// and to carry down through every compaction).
func (r Reward) newRecords() []persist.KV {
	kvs := []persist.KV{{Key: rewardKey(r.Workspace, r.ID), Value: r.encode()}, r.taskRewardEntry()}
	if r.open() {
		kvs = append(kvs, persist.KV{Key: openKey(r.Workspace, r.ID), Value: []byte{}})
	}
	return kvs
}

// Reward returns a reward of ws (engine.ErrNotFound if none).
func (j *Judging) Reward(ws, rewardID string) (Reward, error) {
	v, err := j.store.Get(rewardKey(ws, rewardID))
	if errors.Is(err, persist.ErrNotFound) {
		return Reward{}, fmt.Errorf("reward %s: %w", rewardID, engine.ErrNotFound)
	}
	if err != nil {
		return Reward{}, err
	}
	return decodeReward(ws, v)
}

// putReward stores r (synced).
func (j *Judging) putReward(r Reward) error { return j.store.Put(r.records()...) }

// finishReward stores r, now final, with its final record claimed first
// (persist.KV.Unique): in a cluster, two nodes that judged the same reward
// (its task moved between them meanwhile) cannot both make it final. The
// one that claims second gets the first one's reward back, stored again,
// and reports that one; the same goes after a crash between the claim and
// the record.
func (j *Judging) finishReward(r Reward) (Reward, error) {
	final := persist.KV{Key: finalKey(r.Workspace, r.ID), Value: r.encode(), Unique: true}
	err := j.store.Put(append([]persist.KV{final}, r.records()...)...)
	if !errors.Is(err, persist.ErrExists) {
		return r, err
	}
	v, err := j.store.Get(final.Key)
	if err != nil {
		return r, fmt.Errorf("reward %s: final record: %w", r.ID, err)
	}
	if r, err = decodeReward(r.Workspace, v); err != nil {
		return r, err
	}
	return r, j.putReward(r)
}

// openRewards lists the open rewards of every workspace.
func (j *Judging) openRewards() ([]Reward, error) {
	var keys [][2]string
	err := j.store.Scan([]byte("judging/open/"), func(k, _ []byte) error {
		ws, rid, ok := strings.Cut(strings.TrimPrefix(string(k), "judging/open/"), "/")
		if !ok {
			return fmt.Errorf("open reward key %q: %w", k, persist.ErrCorrupt)
		}
		keys = append(keys, [2]string{ws, rid})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return j.rewardsAt(keys)
}

// rewardsAt reads the rewards named {workspace, reward id}. One unreadable
// record does not keep the others from resuming: its error is joined to
// the ones returned.
func (j *Judging) rewardsAt(keys [][2]string) ([]Reward, error) {
	out := make([]Reward, 0, len(keys))
	var errs []error
	for _, k := range keys {
		r, err := j.Reward(k[0], k[1])
		if err != nil {
			errs = append(errs, fmt.Errorf("reward %s/%s: %w", k[0], k[1], err))
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// Pin is the versions a workspace's rewards on a task use by default.
type Pin struct{ TaskVersion, JudgeVersion string }

func (j *Judging) pin(ws, task string) (Pin, bool, error) {
	key := pinKey(ws, task)
	if p, ok := j.pinned.Get(key); ok {
		return p, true, nil
	}
	v, err := j.store.Get(key)
	if errors.Is(err, persist.ErrNotFound) {
		return Pin{}, false, nil
	}
	if err != nil {
		return Pin{}, false, err
	}
	p, err := fastjson.ParseBytes(v)
	if err != nil {
		return Pin{}, false, fmt.Errorf("pin record: %w", persist.ErrCorrupt)
	}
	pin := Pin{TaskVersion: string(p.GetStringBytes("task_version")),
		JudgeVersion: string(p.GetStringBytes("judge_version"))}
	j.pinned.Put(key, pin)
	return pin, true, nil
}

func (p Pin) encode() []byte {
	b := []byte{'{'}
	b = jsonw.Key(b, "task_version")
	b = jsonw.String(b, p.TaskVersion)
	b = jsonw.Key(b, "judge_version")
	b = jsonw.String(b, p.JudgeVersion)
	return append(b, '}')
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func rewardKey(ws, rid string) []byte { return []byte("judging/reward/" + ws + "/" + rid) }
func openKey(ws, rid string) []byte   { return []byte("judging/open/" + ws + "/" + rid) }
func finalKey(ws, rid string) []byte  { return []byte("judging/final/" + ws + "/" + rid) }
func pinKey(ws, task string) []byte   { return []byte("judging/pin/" + ws + "/" + task) }

func episodePrefix(ws, runID string) []byte {
	return []byte("judging/episode/" + ws + "/" + runID + "/")
}

func episodeKey(ws, runID, rid string) []byte { return append(episodePrefix(ws, runID), rid...) }

// EpisodeSignals are the judge.* signals a scored reward appends to one
// episode: its scores, on run Run of agent Agent, each with dedup key
// "<kind>/<Key>".
type EpisodeSignals struct {
	Workspace string
	Reward    string // the reward's id
	Key       string
	Run       string
	Agent     string
	Scores    judge.Scores
}

// episodeSignals are r's signals for episode run of agent: keyed by r's id
// on its own episode, by r's id and the run on a linked one (an episode of
// the same agent would otherwise find its signals already there).
func (r Reward) episodeSignals(run, agent string) EpisodeSignals {
	key := r.ID
	if run != r.EpisodeID {
		key += "/" + run
	}
	return EpisodeSignals{Workspace: r.Workspace, Reward: r.ID, Key: key, Run: run, Agent: agent, Scores: r.Scores}
}

// An episode link: the same answer sent again with an episode of its own
// gets the first reward, and its episode that reward's signals. The link
// (judging/link/<ws>/<rw id>/<run id> → the run's agent) is kept until
// they are appended.
type link struct{ run, agent string }

func linkPrefix(ws, rid string) []byte { return []byte("judging/link/" + ws + "/" + rid + "/") }

// LinkEpisode links run (of agent) to reward rid of ws: the reward is
// listed among the run's evidence, and its signals are appended to the run
// once it is scored (Dispatcher.SettleLinks). Synced before it returns.
func (j *Judging) LinkEpisode(ws, rid, run, agent string) error {
	return j.store.Put(persist.KV{Key: append(linkPrefix(ws, rid), run...), Value: []byte(agent)},
		persist.KV{Key: episodeKey(ws, run, rid), Value: []byte{}})
}

// links lists the episodes linked to reward rid of ws and not yet settled.
func (j *Judging) links(ws, rid string) ([]link, error) {
	var out []link
	prefix := linkPrefix(ws, rid)
	err := j.store.Scan(prefix, func(k, v []byte) error {
		out = append(out, link{run: string(k[len(prefix):]), agent: string(v)})
		return nil
	})
	return out, err
}

func (j *Judging) unlink(ws, rid, run string) error {
	return j.store.Put(persist.KV{Key: append(linkPrefix(ws, rid), run...)})
}

// linkedRewards lists the rewards of every workspace with an episode link
// not yet settled.
func (j *Judging) linkedRewards() ([]Reward, error) {
	var keys [][2]string
	err := j.store.Scan([]byte("judging/link/"), func(k, _ []byte) error {
		rest := strings.TrimPrefix(string(k), "judging/link/")
		ws, rest, ok1 := strings.Cut(rest, "/")
		rid, _, ok2 := strings.Cut(rest, "/")
		if !ok1 || !ok2 {
			return fmt.Errorf("episode link key %q: %w", k, persist.ErrCorrupt)
		}
		if n := len(keys); n == 0 || keys[n-1] != [2]string{ws, rid} {
			keys = append(keys, [2]string{ws, rid})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return j.rewardsAt(keys)
}

// episodeIndexDone marks the episode index as complete: every reward with
// an episode written before the index existed has its entry.
var episodeIndexDone = []byte("judging/meta/episode-index")

// EpisodeRewards lists the rewards of ws whose episode is runID (a run
// id), oldest first.
func (j *Judging) EpisodeRewards(ws, runID string) ([]Reward, error) {
	var ids []string
	prefix := episodePrefix(ws, runID)
	err := j.store.Scan(prefix, func(k, _ []byte) error {
		ids = append(ids, string(k[len(prefix):]))
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(ids) // rw_ + ULID: creation order
	out := make([]Reward, 0, len(ids))
	for _, rid := range ids {
		r, err := j.Reward(ws, rid)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// IndexEpisodes writes the episode index entries of rewards stored before
// the index existed, once: a store whose index is marked complete is left
// as it is. It is meant for start-up, before requests are served (rewards
// created meanwhile write their own entries anyway).
func (j *Judging) IndexEpisodes() error {
	if _, err := j.store.Get(episodeIndexDone); err == nil {
		return nil
	} else if !errors.Is(err, persist.ErrNotFound) {
		return err
	}
	var kvs []persist.KV
	err := j.store.Scan([]byte("judging/reward/"), func(k, v []byte) error {
		ws, rid, ok := strings.Cut(strings.TrimPrefix(string(k), "judging/reward/"), "/")
		if !ok {
			return fmt.Errorf("reward key %q: %w", k, persist.ErrCorrupt)
		}
		p, err := fastjson.ParseBytes(v)
		if err != nil {
			return fmt.Errorf("reward record %s/%s: %w", ws, rid, persist.ErrCorrupt)
		}
		if run := string(p.GetStringBytes("episode_id")); run != "" {
			kvs = append(kvs, persist.KV{Key: episodeKey(ws, run, rid), Value: []byte{}})
		}
		return nil
	})
	if err != nil {
		return err
	}
	kvs = append(kvs, persist.KV{Key: episodeIndexDone, Value: []byte{}})
	return j.store.Put(kvs...)
}

// AnswerPrefix begins the key of every answer's first reward. Nearly every
// judged reward brings an answer never seen, so a store may keep a filter
// of these keys to answer that lookup without reading its tables.
const AnswerPrefix = "judging/answer/"

func answerKey(ws, tv, jv, answer string) []byte {
	sum := sha256.Sum256([]byte(answer))
	return []byte(AnswerPrefix + ws + "/" + tv + "/" + jv + "/" + hex.EncodeToString(sum[:]))
}

// AppendJSON renders r in seed 003's shape.
func (r Reward) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "object")
	b = jsonw.String(b, "reward")
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, r.ID)
	b = jsonw.Key(b, "status")
	b = jsonw.String(b, r.Status)
	b = jsonw.Key(b, "episode_id")
	b = jsonw.StringOrNull(b, r.EpisodeID)
	b = jsonw.Key(b, "task")
	b = append(b, '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, r.TaskID)
	b = jsonw.Key(b, "version")
	b = jsonw.String(b, r.TaskVersion)
	b = append(b, '}')
	b = jsonw.Key(b, "judge_version")
	b = jsonw.String(b, r.JudgeVersion)
	b = jsonw.Key(b, "scores")
	if r.Status == StatusScored {
		b = r.Scores.AppendJSON(b)
	} else {
		b = append(b, "null"...)
	}
	b = jsonw.Key(b, "flags")
	b = jsonw.Strings(b, r.Flags)
	b = jsonw.Key(b, "failure")
	if r.Status == StatusFailed {
		b = append(b, '{')
		b = jsonw.Key(b, "reason")
		b = jsonw.String(b, r.Failure)
		b = jsonw.Key(b, "retryable")
		b = jsonw.Bool(b, true)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = jsonw.Key(b, "client_ref")
	if r.ClientRef != nil {
		b = jsonw.String(b, *r.ClientRef)
	} else {
		b = append(b, "null"...)
	}
	b = jsonw.Key(b, "created_at")
	b = jsonw.Time(b, r.CreatedAt)
	b = jsonw.Key(b, "scored_at")
	b = jsonw.TimeOrNull(b, r.ScoredAt)
	return append(b, '}')
}

// encode is the stored record: the rendered fields plus what resuming
// needs (answer, outcomes, the episode's agent, signals_pending).
func (r Reward) encode() []byte {
	// Room for the usual record: grown from nothing, it was copied six
	// times on its way.
	b := r.AppendJSON(make([]byte, 0, 1024+len(r.Answer)+128*len(r.Outcomes)))
	b = b[:len(b)-1]
	b = jsonw.Key(b, "answer")
	b = jsonw.String(b, r.Answer)
	b = jsonw.Key(b, "episode_agent")
	b = jsonw.String(b, r.EpisodeAgent)
	b = jsonw.Key(b, "outcomes")
	b = jsonw.Ints(b, r.Outcomes)
	b = jsonw.Key(b, "signals_pending")
	b = jsonw.Bool(b, r.SignalsPending)
	return append(b, '}')
}

func decodeReward(ws string, b []byte) (Reward, error) {
	corrupt := func(what string) (Reward, error) {
		return Reward{}, fmt.Errorf("reward record: %s: %w", what, persist.ErrCorrupt)
	}
	v, err := fastjson.ParseBytes(b)
	if err != nil {
		return corrupt("not JSON")
	}
	r := Reward{ID: string(v.GetStringBytes("id")), Workspace: ws, Status: string(v.GetStringBytes("status")),
		TaskID: string(v.GetStringBytes("task", "id")), TaskVersion: string(v.GetStringBytes("task", "version")),
		JudgeVersion: string(v.GetStringBytes("judge_version")), EpisodeID: string(v.GetStringBytes("episode_id")),
		EpisodeAgent: string(v.GetStringBytes("episode_agent")), Answer: string(v.GetStringBytes("answer")),
		Failure: string(v.GetStringBytes("failure", "reason")), SignalsPending: v.GetBool("signals_pending")}
	if s := v.Get("client_ref"); s != nil && s.Type() == fastjson.TypeString {
		ref := string(s.GetStringBytes())
		r.ClientRef = &ref
	}
	if s := v.Get("scores"); s != nil && s.Type() == fastjson.TypeObject {
		r.Scores = judge.Scores{Reward: s.GetFloat64("reward"), Partial: s.GetFloat64("partial"),
			MustPass: s.GetFloat64("must_pass"), AllPass: s.GetFloat64("all_pass")}
	}
	for _, f := range v.GetArray("flags") {
		r.Flags = append(r.Flags, string(f.GetStringBytes()))
	}
	for _, o := range v.GetArray("outcomes") {
		r.Outcomes = append(r.Outcomes, judge.Outcome(o.GetInt()))
	}
	if r.CreatedAt, err = time.Parse(time.RFC3339Nano, string(v.GetStringBytes("created_at"))); err != nil {
		return corrupt("created_at")
	}
	if s := v.GetStringBytes("scored_at"); s != nil {
		if r.ScoredAt, err = time.Parse(time.RFC3339Nano, string(s)); err != nil {
			return corrupt("scored_at")
		}
	}
	switch r.Status {
	case StatusPending, StatusScored, StatusFailed:
	default:
		return corrupt("status")
	}
	return r, nil
}
