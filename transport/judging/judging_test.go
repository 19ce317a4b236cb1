package judging

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine/judge"
	"github.com/plaudit/plaudit/persist/pebblelog"
)

func task(t *testing.T, weight int) judge.Task {
	t.Helper()
	tk, err := judge.Parse([]byte(fmt.Sprintf(`{"id": "a/b", "rubric": {"criteria": [{"id": "c", "weight": %d, "check": {"type": "json_valid"}}]}}`, weight)), "")
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestConcurrentPutsNumberVersionsOnce: racing puts of one content create
// it once; racing puts of different contents get distinct sequences.
func TestConcurrentPutsNumberVersionsOnce(t *testing.T) {
	s, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j := New(s, time.Now, 0)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		seqs    = map[int]string{}
	)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tv, c, err := j.PutTask("default", task(t, 1+i%4))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if c {
				created++
				if other, dup := seqs[tv.Seq]; dup {
					t.Errorf("seq %d given to %s and %s", tv.Seq, other, tv.Version)
				}
				seqs[tv.Seq] = tv.Version
			}
		}()
	}
	wg.Wait()
	if created != 4 {
		t.Fatalf("%d versions created from 4 contents", created)
	}
	versions, err := j.TaskVersions("default", "a/b")
	if err != nil || len(versions) != 4 {
		t.Fatalf("versions = %d, %v", len(versions), err)
	}
	for i, tv := range versions {
		if tv.Seq != i+1 {
			t.Fatalf("version %d has seq %d", i, tv.Seq)
		}
	}
	// A task whose id extends another's is another task.
	if vs, _ := j.TaskVersions("default", "a"); len(vs) != 0 {
		t.Fatalf("task a lists %d versions of a/b", len(vs))
	}
}

// TestANewRewardWritesAnOpenMarkerOnlyIfOpen: a reward made open gets its
// marker; one made closed writes nothing under the marker's key, not even
// a delete (there is nothing to delete: its id is new). Both get their
// record and their task's index entry.
func TestANewRewardWritesAnOpenMarkerOnlyIfOpen(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Reward
		open bool
	}{
		{"pending", Reward{ID: "rw_1", Workspace: "ws_1", Status: StatusPending}, true},
		{"scored, signals pending", Reward{ID: "rw_2", Workspace: "ws_1", Status: StatusScored, SignalsPending: true}, true},
		{"scored", Reward{ID: "rw_3", Workspace: "ws_1", Status: StatusScored}, false},
		{"failed", Reward{ID: "rw_4", Workspace: "ws_1", Status: StatusFailed}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			written := map[string][]byte{}
			for _, kv := range tc.r.newRecords() {
				written[string(kv.Key)] = kv.Value
			}
			want := map[string][]byte{
				string(rewardKey(tc.r.Workspace, tc.r.ID)): tc.r.encode(),
				string(tc.r.taskRewardEntry().Key):         tc.r.taskRewardEntry().Value,
			}
			if tc.open {
				want[string(openKey(tc.r.Workspace, tc.r.ID))] = []byte{}
			}
			if !reflect.DeepEqual(written, want) {
				t.Errorf("a new reward writes %q, want %q", written, want)
			}
		})
	}
}
