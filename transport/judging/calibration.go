package judging

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// CalibrationRewards returns, for calibration against human reviews, the
// scored rewards of a task in ws that have an episode, one per (task
// version, judge version, episode): of several, the latest scored (the
// greatest ScoredAt, then the greatest id, ids growing in creation order).
// They come sorted by task version, judge version and episode; judgeVersion
// "" keeps every judge version, else only that one.
//
// It scans every reward record of ws (judging/reward/<ws>/): computed on
// read, like the rewards themselves, at a cost linear in the workspace's
// rewards.
func (j *Judging) CalibrationRewards(ws, task, judgeVersion string) ([]Reward, error) {
	type key struct{ tv, jv, episode string }
	latest := map[key]Reward{}
	err := j.store.Scan([]byte("judging/reward/"+ws+"/"), func(k, v []byte) error {
		r, err := decodeReward(ws, v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		if r.TaskID != task || r.Status != StatusScored || r.EpisodeID == "" ||
			(judgeVersion != "" && r.JudgeVersion != judgeVersion) {
			return nil
		}
		kk := key{r.TaskVersion, r.JudgeVersion, r.EpisodeID}
		if cur, seen := latest[kk]; !seen || laterScored(r, cur) {
			latest[kk] = r
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
