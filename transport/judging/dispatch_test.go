package judging

import (
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine/judge"
	"github.com/plaudit/plaudit/persist/pebblelog"
)

// toneJudging is a Judging on a store of its own, with task a/t of
// workspace ws: one criterion, asked of judge "tone".
func toneJudging(t *testing.T) (*Judging, judge.Task) {
	t.Helper()
	s, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	j := New(s, time.Now, 0)
	tk, err := judge.Parse([]byte(`{"id": "a/t", "rubric": {"criteria": [{"id": "tone", "check": {"judge": "tone"}}]}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.PutTask("ws", tk); err != nil {
		t.Fatal(err)
	}
	return j, tk
}

// A reward is judged only by the node that owns it (Owns), once however
// often it is started there, and a reward its node stops owning while its
// judge is asked is not written by it.
func TestADispatcherJudgesOnlyTheRewardsItOwnsAndEachOnce(t *testing.T) {
	j, _ := toneJudging(t)
	var (
		owned   atomic.Bool
		asked   atomic.Int32
		release = make(chan struct{})
	)
	d := NewDispatcher(j, DispatchConfig{Deadline: 10 * time.Second, Owns: func(Reward) bool { return owned.Load() },
		Judge: func(ws, subject string, data []byte, timeout time.Duration) ([]byte, error) {
			asked.Add(1)
			<-release
			return []byte(`{"met": true}`), nil
		}})
	defer d.Close()
	pending := func(answer string) Reward {
		r, created, err := j.CreateReward("ws", NewReward{TaskID: "a/t", Answer: answer})
		if err != nil || !created || r.Final() {
			t.Fatalf("CreateReward: %+v, %v, %v", r, created, err)
		}
		return r
	}

	r := pending("first")
	d.Start(r) // not owned: not judged
	owned.Store(true)
	var wg sync.WaitGroup
	for range 4 { // owned, started four times at once: judged once
		wg.Add(1)
		go func() { defer wg.Done(); d.Start(r) }()
	}
	wg.Wait()
	close(release)
	got, err := d.Wait("ws", r.ID, 10*time.Second)
	if err != nil || got.Status != StatusScored {
		t.Fatalf("owned reward: %+v, %v; want scored", got, err)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the judge was asked %d times, want once", n)
	}

	// Owned when started, not by the time its judge answers: the reward
	// stays as it was, for the node that owns it now.
	release = make(chan struct{})
	r = pending("second")
	d.Start(r)
	for asked.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	owned.Store(false)
	close(release)
	d.workers.Wait()
	if got, err := j.Reward("ws", r.ID); err != nil || got.Status != StatusPending || got.Outcomes[0] != judge.Pending {
		t.Errorf("a reward its node stopped owning: %+v, %v; want it pending as stored", got, err)
	}
}

// A waiter is answered when the reward turns final on another node (its
// task moved there), not only at the end of its wait.
func TestAWaiterSeesARewardAnotherNodeFinished(t *testing.T) {
	j, tk := toneJudging(t)
	r, _, err := j.CreateReward("ws", NewReward{TaskID: "a/t", Answer: "x"})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDispatcher(j, DispatchConfig{Owns: func(Reward) bool { return false }}) // judged elsewhere
	defer d.Close()
	got := make(chan Reward, 1)
	go func() {
		w, _ := d.Wait("ws", r.ID, time.Hour)
		got <- w
	}()
	for waiting := false; !waiting; { // the waiter has read the reward pending
		time.Sleep(time.Millisecond)
		d.mu.Lock()
		_, waiting = d.waiters["ws/"+r.ID]
		d.mu.Unlock()
	}
	r.Outcomes[0] = judge.Met
	r.score(tk, time.Now())
	if _, err := j.finishReward(r); err != nil { // as the other node's dispatcher does
		t.Fatal(err)
	}
	select {
	case w := <-got:
		if w.Status != StatusScored {
			t.Errorf("the waiter got %+v, want the scored reward", w)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter was not answered once the reward was final")
	}
}

// An episode link that a stop left unsettled is settled by the next
// Resume: a scored reward's signals go to the linked run, keyed by the
// reward and the run; a failed reward's link is dropped with nothing sent.
func TestResumeSettlesTheLinksOfFinalRewards(t *testing.T) {
	j, _ := toneJudging(t)
	met := true
	judged := func(answer string) Reward {
		d := NewDispatcher(j, DispatchConfig{Deadline: 200 * time.Millisecond,
			Judge: func(ws, subject string, data []byte, timeout time.Duration) ([]byte, error) {
				if !met {
					return nil, errors.New("judge down")
				}
				return []byte(`{"met": true}`), nil
			}})
		defer d.Close()
		r, _, err := j.CreateReward("ws", NewReward{TaskID: "a/t", Answer: answer})
		if err != nil {
			t.Fatal(err)
		}
		d.Start(r)
		if r, err = d.Wait("ws", r.ID, 5*time.Second); err != nil || !r.Final() {
			t.Fatalf("reward %+v, %v; want it final", r, err)
		}
		return r
	}
	scored := judged("scored")
	met = false
	failed := judged("failed")
	for _, l := range []struct{ rid, run string }{{scored.ID, "run_a"}, {scored.ID, "run_b"}, {failed.ID, "run_c"}} {
		if err := j.LinkEpisode("ws", l.rid, l.run, "agt_1"); err != nil {
			t.Fatal(err)
		}
	}
	var got []EpisodeSignals
	d := NewDispatcher(j, DispatchConfig{Episode: func(e EpisodeSignals) error { got = append(got, e); return nil }})
	defer d.Close()
	if err := d.Resume(); err != nil {
		t.Fatal(err)
	}
	want := []EpisodeSignals{
		{Workspace: "ws", Reward: scored.ID, Key: scored.ID + "/run_a", Run: "run_a", Agent: "agt_1", Scores: scored.Scores},
		{Workspace: "ws", Reward: scored.ID, Key: scored.ID + "/run_b", Run: "run_b", Agent: "agt_1", Scores: scored.Scores},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("signals sent %+v, want %+v", got, want)
	}
	for _, rid := range []string{scored.ID, failed.ID} {
		if links, err := j.links("ws", rid); err != nil || len(links) != 0 {
			t.Errorf("reward %s: links %v, %v after Resume; want none", rid, links, err)
		}
	}
	if linked, err := j.linkedRewards(); err != nil || len(linked) != 0 {
		t.Errorf("linked rewards after Resume: %v, %v", linked, err)
	}
}
