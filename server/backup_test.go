package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/plaudit/plaudit/backup"
	"github.com/plaudit/plaudit/persist/pebblelog"
)

// sent is one write of the load: when it was sent and, if it was
// acknowledged, when.
type sent struct {
	run, dedup   string
	finish       bool // a finish (two events in one batch), not a signal
	start, acked time.Time
}

// TestBackupUnderWriteLoad takes a backup over HTTP while writers post
// signals and finish runs through the HTTP door, restores it into a new
// data directory and starts a server on it:
//   - every write acknowledged before the backup was asked for is there;
//   - no write sent after the backup was received is;
//   - every finished run has both its status and its run.succeeded signal
//     or neither (a command's events are never half there);
//   - an agent left alone during the load reads the same, byte for byte.
func TestBackupUnderWriteLoad(t *testing.T) {
	s := startServer(t, Config{SnapshotEvery: 40})
	c := newClient(t, s, adminKey)

	// The quiet agent: written before, read after, by both servers.
	quiet := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "quiet"}`), "id")
	quietRun := str(t, c.must(201, "POST", "/api/v1/agents/"+quiet+"/runs", `{"version": "1"}`), "id")
	for i := range 30 {
		c.must(201, "POST", "/api/v1/agents/"+quiet+"/signals",
			fmt.Sprintf(`{"kind": "human.rating", "value": %d, "run_id": %q, "dedup_key": "q%d"}`, i%5, quietRun, i))
	}
	quietReads := []string{
		"/api/v1/agents/" + quiet,
		"/api/v1/agents/" + quiet + "/runs/" + quietRun,
		"/api/v1/agents/" + quiet + "/runs/" + quietRun + "/signals",
		"/api/v1/agents/" + quiet + "/runs/" + quietRun + "/reward",
		"/api/v1/agents/" + quiet + "/versions/1/rewards",
	}
	before := map[string]string{}
	for _, p := range quietReads {
		before[p] = string(c.request("GET", p, "", nil).body)
	}

	const writers = 12
	agents := make([]string, 3)
	for i := range agents {
		agents[i] = str(t, c.must(201, "POST", "/api/v1/agents", fmt.Sprintf(`{"name": "busy-%d"}`, i)), "id")
	}
	var (
		mu     sync.Mutex
		writes []sent
		runsOf = map[string]string{} // run → agent
		stop   = make(chan struct{})
		wg     sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			agent := agents[w%len(agents)]
			for r := 0; ; r++ {
				res, err := c.rawSend("POST", "/api/v1/agents/"+agent+"/runs", `{"version": "1"}`, nil)
				if err != nil || res.status != 201 {
					t.Errorf("create run: %v %d %s", err, res.status, res.body)
					return
				}
				run := str(t, res.json(t), "id")
				mu.Lock()
				runsOf[run] = agent
				mu.Unlock()
				for i := range 5 {
					select {
					case <-stop:
						return
					default:
					}
					wr := sent{run: run, dedup: fmt.Sprintf("w%d-r%d-%d", w, r, i), start: time.Now()}
					res, err := c.rawSend("POST", "/api/v1/agents/"+agent+"/signals",
						fmt.Sprintf(`{"kind": "load", "value": 1, "run_id": %q, "dedup_key": %q}`, run, wr.dedup), nil)
					if err == nil && res.status == 201 {
						wr.acked = time.Now()
					}
					mu.Lock()
					writes = append(writes, wr)
					mu.Unlock()
				}
				wr := sent{run: run, finish: true, start: time.Now()}
				res, err = c.rawSend("POST", "/api/v1/agents/"+agent+"/runs/"+run+"/finish", `{"succeeded": true}`, nil)
				if err == nil && res.status == 200 {
					wr.acked = time.Now()
				}
				mu.Lock()
				writes = append(writes, wr)
				mu.Unlock()
			}
		}()
	}

	time.Sleep(300 * time.Millisecond)
	dir := filepath.Join(t.TempDir(), "backup")
	asked := time.Now()
	m, err := backup.Fetch(context.Background(), http.DefaultClient, "http://"+s.HTTPAddr(), adminKey, dir)
	received := time.Now()
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	for _, f := range m.Files {
		if f.Name == "plaudit.ballast" {
			t.Fatalf("the backup holds the ballast: %+v", m.Files)
		}
	}
	if m.Plaudit == "" || m.Pebble == "" || m.Created.IsZero() {
		t.Fatalf("manifest = %+v", m)
	}
	if entries, err := os.ReadDir(filepath.Join(s.cfg.DataDir, pebblelog.CheckpointsDir)); err != nil || len(entries) != 0 {
		t.Fatalf("checkpoints left in the data directory: %v %v", entries, err)
	}

	data := filepath.Join(t.TempDir(), "restored")
	if _, _, err := backup.Restore(dir, data); err != nil {
		t.Fatalf("restore: %v", err)
	}
	r := startServer(t, Config{DataDir: data})
	rc := newClient(t, r, adminKey)

	for _, p := range quietReads {
		if got := string(rc.request("GET", p, "", nil).body); got != before[p] {
			t.Errorf("restored GET %s:\n%s\nwant\n%s", p, got, before[p])
		}
	}

	type runState struct {
		dedups    map[string]bool
		succeeded int // run.succeeded signals
		status    string
	}
	restored := map[string]*runState{}
	for run, agent := range runsOf {
		got := rc.request("GET", "/api/v1/agents/"+agent+"/runs/"+run, "", nil)
		if got.status == 404 {
			continue // created after the backup
		}
		st := &runState{dedups: map[string]bool{}, status: str(t, got.json(t), "status")}
		for _, it := range list(t, rc.must(200, "GET", "/api/v1/agents/"+agent+"/runs/"+run+"/signals", ""), "items") {
			sig := it.(map[string]any)
			switch sig["kind"] {
			case "load":
				st.dedups[sig["dedup_key"].(string)] = true
			case "run.succeeded":
				st.succeeded++
			}
		}
		restored[run] = st
	}

	var ackedBefore, in, after int
	for _, w := range writes {
		st := restored[w.run]
		var present bool
		switch {
		case st == nil:
		case w.finish:
			present = st.status != "running"
			if (st.status == "succeeded") != (st.succeeded == 1) || st.succeeded > 1 {
				t.Errorf("run %s restored half finished: status %s, %d run.succeeded signals", w.run, st.status, st.succeeded)
			}
		default:
			present = st.dedups[w.dedup]
		}
		if present {
			in++
		}
		if !w.acked.IsZero() && w.acked.Before(asked) {
			ackedBefore++
			if !present {
				t.Errorf("write %+v acknowledged before the backup is not in it", w)
			}
		}
		if w.start.After(received) {
			after++
			if present {
				t.Errorf("write %+v sent after the backup is in it", w)
			}
		}
	}
	if ackedBefore < 50 || after == 0 {
		t.Fatalf("the load did not straddle the backup: %d writes acknowledged before it, %d sent after", ackedBefore, after)
	}
	t.Logf("%d writes: %d acknowledged before the backup, %d in it, %d sent after it", len(writes), ackedBefore, in, after)
}

// TestBackupEndpointRefusesNonAdmins: no key, a bad key and a workspace
// key are refused before any checkpoint is made; a GET is 405.
func TestBackupEndpointRefusesNonAdmins(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, s, adminKey)
	wsKey := str(t, c.must(201, "POST", "/v1/workspaces/default/api-keys", `{"name": "ci"}`), "key")
	tests := []struct {
		name, method, key string
		want              int
	}{
		{"no key", "POST", "", 401},
		{"unknown key", "POST", "pl_not_a_key", 401},
		{"workspace key", "POST", wsKey, 403},
		{"admin, wrong method", "GET", adminKey, 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := c.on(t).as(tt.key).request(tt.method, backup.Path, "", nil)
			if res.status != tt.want {
				t.Fatalf("status %d, want %d: %s", res.status, tt.want, res.body)
			}
			if tt.want == 405 && res.header.Get("Allow") != "POST" {
				t.Errorf("Allow %q, want POST", res.header.Get("Allow"))
			}
			if _, err := os.Stat(filepath.Join(s.cfg.DataDir, pebblelog.CheckpointsDir)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a checkpoint was made: %v", err)
			}
		})
	}
	if _, err := backup.Fetch(context.Background(), http.DefaultClient, "http://"+s.HTTPAddr(), wsKey, t.TempDir()); err == nil {
		t.Fatal("Fetch with a workspace key succeeded")
	}
}
