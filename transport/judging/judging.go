// Package judging keeps judged answers (seed 003) and what they are scored
// against: the versions of each workspace's tasks, its judge versions, and
// its rewards. Task and judge versions are immutable once written: a task
// version is named by its content (the same content is the same version), a
// judge version by its name (published once). Records are small and written
// through, synced, before they are answered. The Dispatcher asks the model
// judges of pending rewards, outside every actor.
//
// # Key layout
//
//	judging/task/<ws>/<task id>\x00<version>          a task version
//	judging/judge/<ws>/<name>                         a published judge version
//	judging/reward/<ws>/<rw id>                       a reward: what it renders, plus its answer and outcomes
//	judging/open/<ws>/<rw id>                         (empty) a reward still pending, or with episode signals to append
//	judging/final/<ws>/<rw id>                        a judged reward as first made final (written once: persist.KV.Unique)
//	judging/answer/<ws>/<tv>/<jv>/<sha256 hex>        the first reward of an answer (its id), for "same answer"
//	judging/pin/<ws>/<task id>                        the versions the workspace's rewards on a task use by default
//	judging/episode/<ws>/<run id>/<rw id>             (empty) a reward whose episode_id is the run
//	judging/task-reward/<ws>/<task id>\x00<rw id>      a reward's task version, judge version, status, reward and flags
//	judging/meta/episode-index                        (empty) every reward with an episode has its judging/episode/ entry
//	judging/meta/task-index                           (empty) every reward has its judging/task-reward/ entry
//
// A reward, its same-answer entry, its episode entry, its open marker, its
// task-reward entry and a new pin go out in one synced Put; every later
// write of the reward rewrites its open marker and task-reward entry with
// it. Rewards stored before an index existed get their entries from
// IndexEpisodes and IndexTasks, run once at start-up, which then write the
// index's judging/meta/ marker so later starts skip the scan.
//
// A task id holds no control character, so "<task id>\x00" is a prefix of
// exactly that task's versions, whatever the id holds ('/' included).
package judging

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/engine/judge"
	"github.com/plaudit/plaudit/internal/fixed"
	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/persist"
)

// Store is what the records need on disk.
type Store interface {
	Get(key []byte) ([]byte, error) // persist.ErrNotFound when absent
	Put(kvs ...persist.KV) error
	Scan(prefix []byte, fn func(key, value []byte) error) error
}

// DefaultJudgeVersion is the judge version every workspace has from the
// start: it sends judge <name> to subject <name>.
const DefaultJudgeVersion = "j1"

// ErrJudgeRequestTooLarge is CreateReward's failure for an answer that,
// with its task, makes a judge request over what the transport carries.
var ErrJudgeRequestTooLarge = errors.New("judge request too large")

// Judging is the task and judge-version records of every workspace.
type Judging struct {
	store Store
	now   func() time.Time
	// maxRequest bounds a judge request's size (0: unbounded): NATS's
	// max_payload, less room for headers.
	maxRequest int
	// mu serialises the check-and-set of new records; reads need no lock.
	// Creations are rare next to reads and each is one synced Put.
	mu sync.Mutex
	// pins and answers serialise CreateReward's check-and-set of a task's
	// pin and of an answer's same-answer entry.
	pins    stripedLocks // the first rewards of a task, which make its pin
	answers stripedLocks // the rewards of one answer
	// tasks, judges and pinned cache records that never change once
	// stored (task versions, judge versions, a task's pin): reading and
	// parsing them on every judged reward was a quarter of its CPU.
	tasks  *fixed.Cache[TaskVersion]
	judges *fixed.Cache[JudgeVersion]
	pinned *fixed.Cache[Pin]
}

// New returns the records kept in store; maxRequest bounds the size of a
// judge request (0: no bound).
func New(store Store, now func() time.Time, maxRequest int) *Judging {
	return &Judging{store: store, now: now, maxRequest: maxRequest, pins: stripedLocks{seed: maphash.MakeSeed()},
		answers: stripedLocks{seed: maphash.MakeSeed()}, tasks: fixed.New[TaskVersion](),
		judges: fixed.New[JudgeVersion](), pinned: fixed.New[Pin]()}
}

// TaskVersion is one version of a task.
type TaskVersion struct {
	Task      judge.Task
	Version   string // "tv_" + 16 hex of the content hash
	Seq       int    // the task's versions count 1, 2, … in creation order
	CreatedAt time.Time
}

// PutTask stores t's version unless it exists; created tells which. The
// newest version of a task is its current one.
func (j *Judging) PutTask(ws string, t judge.Task) (tv TaskVersion, created bool, err error) {
	version := t.Version()
	j.mu.Lock()
	defer j.mu.Unlock()
	if old, err := j.TaskVersion(ws, t.ID, version); err == nil {
		return old, false, nil
	} else if !errors.Is(err, engine.ErrNotFound) {
		return TaskVersion{}, false, err
	}
	versions, err := j.TaskVersions(ws, t.ID)
	if err != nil {
		return TaskVersion{}, false, err
	}
	tv = TaskVersion{Task: t, Version: version, Seq: len(versions) + 1, CreatedAt: j.now().UTC()}
	if err := j.store.Put(persist.KV{Key: taskKey(ws, t.ID, version), Value: encodeTaskVersion(tv)}); err != nil {
		return TaskVersion{}, false, fmt.Errorf("put task %s: %w", t.ID, err)
	}
	return tv, true, nil
}

// TaskVersion returns one version of a task (engine.ErrNotFound if none).
func (j *Judging) TaskVersion(ws, id, version string) (TaskVersion, error) {
	key := taskKey(ws, id, version)
	if tv, ok := j.tasks.Get(key); ok {
		return tv, nil
	}
	v, err := j.store.Get(key)
	if errors.Is(err, persist.ErrNotFound) {
		return TaskVersion{}, fmt.Errorf("task %s version %s: %w", id, version, engine.ErrNotFound)
	}
	if err != nil {
		return TaskVersion{}, err
	}
	tv, err := decodeTaskVersion(v)
	if err == nil {
		j.tasks.Put(key, tv)
	}
	return tv, err
}

// TaskVersions lists a task's versions, oldest first; none is
// engine.ErrNotFound only for callers that need the task to exist.
func (j *Judging) TaskVersions(ws, id string) ([]TaskVersion, error) {
	var out []TaskVersion
	err := j.store.Scan(taskPrefix(ws, id), func(_, v []byte) error {
		tv, err := decodeTaskVersion(v)
		out = append(out, tv)
		return err
	})
	slices.SortFunc(out, func(a, b TaskVersion) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, err
}

// TaskSummary is one task of a workspace, as its list shows it.
type TaskSummary struct {
	ID        string
	Current   TaskVersion // its newest version
	Versions  int
	CreatedAt time.Time // its first version's
}

// Tasks lists the tasks of workspace ws, by id.
func (j *Judging) Tasks(ws string) ([]TaskSummary, error) {
	prefix := []byte("judging/task/" + ws + "/")
	var out []TaskSummary
	first := 0 // the seq of the current task's first version seen so far
	err := j.store.Scan(prefix, func(k, v []byte) error {
		id, _, ok := bytes.Cut(k[len(prefix):], []byte{0})
		if !ok {
			return fmt.Errorf("task record %q: %w", k, persist.ErrCorrupt)
		}
		tv, err := decodeTaskVersion(v)
		if err != nil {
			return err
		}
		// A task's versions are next to one another ("<id>\x00" is the
		// prefix of its keys alone), in the order of their names.
		if n := len(out); n == 0 || out[n-1].ID != string(id) {
			out = append(out, TaskSummary{ID: string(id), Current: tv, CreatedAt: tv.CreatedAt})
			first = tv.Seq
		}
		t := &out[len(out)-1]
		t.Versions++
		if tv.Seq > t.Current.Seq {
			t.Current = tv
		}
		if tv.Seq < first {
			first, t.CreatedAt = tv.Seq, tv.CreatedAt
		}
		return nil
	})
	return out, err
}

func taskPrefix(ws, id string) []byte { return []byte("judging/task/" + ws + "/" + id + "\x00") }

func taskKey(ws, id, version string) []byte { return append(taskPrefix(ws, id), version...) }

// encodeTaskVersion: {"seq", "created_at", "task"} with the canonical task.
func encodeTaskVersion(tv TaskVersion) []byte {
	b := []byte{'{'}
	b = jsonw.Key(b, "seq")
	b = jsonw.Int(b, int64(tv.Seq))
	b = jsonw.Key(b, "created_at")
	b = jsonw.Time(b, tv.CreatedAt)
	b = jsonw.Key(b, "task")
	b = tv.Task.AppendJSON(b)
	return append(b, '}')
}

func decodeTaskVersion(b []byte) (TaskVersion, error) {
	v, err := fastjson.ParseBytes(b)
	if err != nil {
		return TaskVersion{}, fmt.Errorf("task record: %w", persist.ErrCorrupt)
	}
	t, err := judge.ParseValue(v.Get("task"), "task")
	if err != nil {
		return TaskVersion{}, fmt.Errorf("task record: %v: %w", err, persist.ErrCorrupt)
	}
	at, err := time.Parse(time.RFC3339Nano, string(v.GetStringBytes("created_at")))
	if err != nil {
		return TaskVersion{}, fmt.Errorf("task record: %w", persist.ErrCorrupt)
	}
	return TaskVersion{Task: t, Version: t.Version(), Seq: v.GetInt("seq"), CreatedAt: at}, nil
}

// JudgeVersion maps judge names to the NATS subject tokens their workers
// serve (plaudit.judge.<ws>.<subject>). A name it does not map is sent to
// the subject of the same name, as in j1.
type JudgeVersion struct {
	Name      string
	Judges    map[string]string
	CreatedAt time.Time // zero for j1
}

// Subject is the subject token judge name is sent to.
func (jv JudgeVersion) Subject(name string) string {
	if s, ok := jv.Judges[name]; ok {
		return s
	}
	return name
}

var (
	judgeVersionName = regexp.MustCompile(`^j[1-9][0-9]{0,8}$`)
	subjectToken     = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

// ParseJudgeVersion reads {"judges": {"<name>": "<subject>", …}}; name and
// subject are judge names (1 to 64 of [a-zA-Z0-9_-]).
func ParseJudgeVersion(name string, body []byte) (JudgeVersion, error) {
	if !judgeVersionName.MatchString(name) {
		return JudgeVersion{}, field.Errorf("judge_version", "must be j followed by a number, e.g. j2")
	}
	return field.ParseJSON(body, "", func(v *fastjson.Value) (JudgeVersion, error) {
		var dec field.Decoder
		o := dec.Object(v, "")
		judges := dec.Object(field.Member(o, "judges"), "judges")
		jv := JudgeVersion{Name: name, Judges: map[string]string{}}
		if dec.Err != nil {
			return JudgeVersion{}, dec.Err
		}
		judges.Visit(func(k []byte, s *fastjson.Value) {
			path := field.Join("judges", string(k))
			switch {
			case !subjectToken.Match(k):
				dec.Fail(path, "judge names are 1-64 of [a-zA-Z0-9_-]")
			case s.Type() != fastjson.TypeString || !subjectToken.Match(s.GetStringBytes()):
				dec.Fail(path, "must be a subject token: 1-64 of [a-zA-Z0-9_-]")
			default:
				if _, dup := jv.Judges[string(k)]; !dup {
					jv.Judges[string(k)] = string(s.GetStringBytes())
				}
			}
		})
		return jv, dec.Err
	})
}

// PublishJudgeVersion publishes jv; publishing the same mapping again
// answers the published version (created false), another one is
// engine.ErrConflict: a judge version is fixed once published, j1 included.
func (j *Judging) PublishJudgeVersion(ws string, jv JudgeVersion) (JudgeVersion, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	old, err := j.JudgeVersion(ws, jv.Name)
	switch {
	case err == nil && maps.Equal(old.Judges, jv.Judges):
		return old, false, nil
	case err == nil:
		return JudgeVersion{}, false, fmt.Errorf("judge version %s is already published with other judges: %w", jv.Name, engine.ErrConflict)
	case !errors.Is(err, engine.ErrNotFound):
		return JudgeVersion{}, false, err
	}
	jv.CreatedAt = j.now().UTC()
	if err := j.store.Put(persist.KV{Key: judgeKey(ws, jv.Name), Value: encodeJudgeVersion(jv)}); err != nil {
		return JudgeVersion{}, false, fmt.Errorf("publish judge version %s: %w", jv.Name, err)
	}
	return jv, true, nil
}

// JudgeVersion returns a judge version of ws; j1 always exists.
func (j *Judging) JudgeVersion(ws, name string) (JudgeVersion, error) {
	if name == DefaultJudgeVersion {
		return JudgeVersion{Name: DefaultJudgeVersion, Judges: map[string]string{}}, nil
	}
	key := judgeKey(ws, name)
	if jv, ok := j.judges.Get(key); ok {
		return jv, nil
	}
	v, err := j.store.Get(key)
	if errors.Is(err, persist.ErrNotFound) {
		return JudgeVersion{}, fmt.Errorf("judge version %s: %w", name, engine.ErrNotFound)
	}
	if err != nil {
		return JudgeVersion{}, err
	}
	jv, err := decodeJudgeVersion(name, v)
	if err == nil {
		j.judges.Put(key, jv)
	}
	return jv, err
}

// JudgeVersions lists ws's judge versions, j1 first, then by number.
func (j *Judging) JudgeVersions(ws string) ([]JudgeVersion, error) {
	out := []JudgeVersion{{Name: DefaultJudgeVersion, Judges: map[string]string{}}}
	err := j.store.Scan([]byte("judging/judge/"+ws+"/"), func(k, v []byte) error {
		jv, err := decodeJudgeVersion(string(k[bytes.LastIndexByte(k, '/')+1:]), v)
		out = append(out, jv)
		return err
	})
	slices.SortFunc(out[1:], func(a, b JudgeVersion) int {
		return cmp.Or(cmp.Compare(len(a.Name), len(b.Name)), cmp.Compare(a.Name, b.Name))
	})
	return out, err
}

func judgeKey(ws, name string) []byte { return []byte("judging/judge/" + ws + "/" + name) }

// AppendJSON renders {"name", "judges", "created_at"}.
func (jv JudgeVersion) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "name")
	b = jsonw.String(b, jv.Name)
	b = jsonw.Key(b, "judges")
	b = jsonw.StringMap(b, jv.Judges)
	b = jsonw.Key(b, "created_at")
	b = jsonw.TimeOrNull(b, jv.CreatedAt)
	return append(b, '}')
}

func encodeJudgeVersion(jv JudgeVersion) []byte { return jv.AppendJSON(nil) }

func decodeJudgeVersion(name string, b []byte) (JudgeVersion, error) {
	v, err := fastjson.ParseBytes(b)
	if err != nil {
		return JudgeVersion{}, fmt.Errorf("judge version record: %w", persist.ErrCorrupt)
	}
	jv := JudgeVersion{Name: name, Judges: map[string]string{}}
	o := v.GetObject("judges")
	if o == nil {
		return JudgeVersion{}, fmt.Errorf("judge version record: %w", persist.ErrCorrupt)
	}
	o.Visit(func(k []byte, s *fastjson.Value) { jv.Judges[string(k)] = string(s.GetStringBytes()) })
	if jv.CreatedAt, err = time.Parse(time.RFC3339Nano, string(v.GetStringBytes("created_at"))); err != nil {
		return JudgeVersion{}, fmt.Errorf("judge version record: %w", persist.ErrCorrupt)
	}
	return jv, nil
}
