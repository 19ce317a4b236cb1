package judging

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/plaudit/plaudit/persist"
)

// CalibrationRewards returns, for calibration against human reviews, the
// scored rewards of a task in ws on each of their episodes, one per (task
// version, judge version, episode): of several, the latest scored (the
// greatest ScoredAt, then the greatest id, ids growing in creation order).
// A reward's episodes are its own and those the same answer linked to it
// (LinkEpisode), each returned as a copy of the reward with EpisodeID that
// run: a job linked so holds the reward among its evidence, and its
// review is judged by the same verdict. They come sorted by task version,
// judge version and episode; judgeVersion "" keeps every judge version,
// else only that one.
//
// It scans every reward record of ws (judging/reward/<ws>/) and its
// episode index: computed on read, like the rewards themselves, at a cost
// linear in the workspace's rewards.
func (j *Judging) CalibrationRewards(ws, task, judgeVersion string) ([]Reward, error) {
	type key struct{ tv, jv, episode string }
	latest := map[key]Reward{}
	add := func(r Reward) {
		kk := key{r.TaskVersion, r.JudgeVersion, r.EpisodeID}
		if cur, seen := latest[kk]; !seen || laterScored(r, cur) {
			latest[kk] = r
		}
	}
	scored := map[string]Reward{} // by id
	err := j.store.Scan([]byte("judging/reward/"+ws+"/"), func(k, v []byte) error {
		r, err := decodeReward(ws, v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		if r.TaskID != task || r.Status != StatusScored || (judgeVersion != "" && r.JudgeVersion != judgeVersion) {
			return nil
		}
		scored[r.ID] = r
		if r.EpisodeID != "" {
			add(r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	prefix := episodePrefix(ws, "")
	prefix = prefix[:len(prefix)-1] // judging/episode/<ws>/
	err = j.store.Scan(prefix, func(k, _ []byte) error {
		run, rid, ok := strings.Cut(string(k[len(prefix):]), "/")
		if !ok {
			return fmt.Errorf("episode index key %q: %w", k, persist.ErrCorrupt)
		}
		if r, ok := scored[rid]; ok && run != r.EpisodeID {
			r.EpisodeID = run // linked by the same answer
			add(r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]Reward, 0, len(latest))
	for _, r := range latest {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Reward) int {
		return cmp.Or(strings.Compare(a.TaskVersion, b.TaskVersion), strings.Compare(a.JudgeVersion, b.JudgeVersion),
			strings.Compare(a.EpisodeID, b.EpisodeID))
	})
	return out, nil
}

// laterScored reports whether a was scored after b.
func laterScored(a, b Reward) bool {
	if c := a.ScoredAt.Compare(b.ScoredAt); c != 0 {
		return c > 0
	}
	return a.ID > b.ID
}
