package judging

import (
	"errors"
	"fmt"
	"strings"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/persist"
)

// TaskReward is what a reward's entry in its task's index holds: enough to
// count it in a distribution without reading its record.
type TaskReward struct {
	TaskVersion  string
	JudgeVersion string
	Status       string
	Reward       float64 // scores.reward when scored, else 0
	Flags        []string
}

// taskRewardPrefix is the prefix of a task's index entries in ws: as in a
// task version's key, "<task id>\x00" holds exactly that task's.
func taskRewardPrefix(ws, task string) []byte {
	return []byte("judging/task-reward/" + ws + "/" + task + "\x00")
}

func taskRewardKey(ws, task, rid string) []byte { return append(taskRewardPrefix(ws, task), rid...) }

// taskRewardEntry is r's entry in its task's index. It is written with
// every write of r's record (records), so the two never disagree.
func (r Reward) taskRewardEntry() persist.KV {
	b := []byte{'{'}
	b = jsonw.Key(b, "task_version")
	b = jsonw.String(b, r.TaskVersion)
	b = jsonw.Key(b, "judge_version")
	b = jsonw.String(b, r.JudgeVersion)
	b = jsonw.Key(b, "status")
	b = jsonw.String(b, r.Status)
	b = jsonw.Key(b, "reward")
	b = jsonw.Float(b, r.Scores.Reward)
	b = jsonw.Key(b, "flags")
	b = jsonw.Strings(b, r.Flags)
	return persist.KV{Key: taskRewardKey(r.Workspace, r.TaskID, r.ID), Value: append(b, '}')}
}

// TaskRewards lists the rewards of a task in ws from the task's index, in
// creation order: one prefix scan of that task's entries, whatever else the
// store holds.
func (j *Judging) TaskRewards(ws, task string) ([]TaskReward, error) {
	var out []TaskReward
	err := j.store.Scan(taskRewardPrefix(ws, task), func(k, v []byte) error {
		p, err := fastjson.ParseBytes(v)
		if err != nil {
			return fmt.Errorf("task reward entry %q: %w", k, persist.ErrCorrupt)
		}
		tr := TaskReward{TaskVersion: string(p.GetStringBytes("task_version")),
			JudgeVersion: string(p.GetStringBytes("judge_version")), Status: string(p.GetStringBytes("status")),
			Reward: p.GetFloat64("reward")}
		for _, f := range p.GetArray("flags") {
			tr.Flags = append(tr.Flags, string(f.GetStringBytes()))
		}
		out = append(out, tr)
		return nil
	})
	return out, err
}

// taskIndexDone marks the task index as complete: every reward written
// before the index existed has its entry.
var taskIndexDone = []byte("judging/meta/task-index")

// IndexTasks writes the task index entries of rewards stored before the
// index existed, once, as IndexEpisodes does for episodes: meant for
// start-up, before requests are served and pending rewards resumed.
func (j *Judging) IndexTasks() error {
	if _, err := j.store.Get(taskIndexDone); err == nil {
		return nil
	} else if !errors.Is(err, persist.ErrNotFound) {
		return err
	}
	var kvs []persist.KV
	err := j.store.Scan([]byte("judging/reward/"), func(k, v []byte) error {
		ws, _, ok := strings.Cut(strings.TrimPrefix(string(k), "judging/reward/"), "/")
		if !ok {
			return fmt.Errorf("reward key %q: %w", k, persist.ErrCorrupt)
		}
		r, err := decodeReward(ws, v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		kvs = append(kvs, r.taskRewardEntry())
		return nil
	})
	if err != nil {
		return err
	}
	kvs = append(kvs, persist.KV{Key: taskIndexDone, Value: []byte{}})
	return j.store.Put(kvs...)
}
