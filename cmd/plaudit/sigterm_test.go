package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMDrainsAndExitsCleanly: SIGTERM while writers are posting makes
// the server finish what it accepted and exit 0; after a restart every
// acknowledged signal is there.
func TestSIGTERMDrainsAndExitsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin := buildPlaudit(t)
	data := t.TempDir()
	hc := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	srv := startPlaudit(t, bin, data, "first")
	api := &kclient{t: t, hc: hc, base: srv.base}
	agent := api.id(api.must(201, "POST", "/api/v1/agents", `{"name": "sigterm"}`))
	run := api.id(api.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{}`))

	var (
		mu    sync.Mutex
		acked []string
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	url := srv.base + "/api/v1/agents/" + agent + "/signals"
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				body := fmt.Sprintf(`{"kind":"drain.test","value":1,"run_id":%q,"dedup_key":"g%d-%d"}`, run, g, i)
				status, resp, err := post(hc, url, body)
				if err != nil || status != 201 {
					continue
				}
				var m struct{ ID string }
				if json.Unmarshal(resp, &m) == nil {
					mu.Lock()
					acked = append(acked, m.ID)
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-srv.waitCh:
		srv.killed = true
		if err != nil {
			t.Fatalf("plaudit exited with %v after SIGTERM\n%s", err, srv.output())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("plaudit still running 15s after SIGTERM\n%s", srv.output())
	}
	stop.Store(true)
	wg.Wait()

	srv = startPlaudit(t, bin, data, "second")
	api = &kclient{t: t, hc: hc, base: srv.base}
	var list struct{ Items []struct{ ID string } }
	if err := json.Unmarshal(api.mustRaw(200, "GET", "/api/v1/agents/"+agent+"/runs/"+run+"/signals", ""), &list); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, it := range list.Items {
		have[it.ID] = true
	}
	for _, id := range acked {
		if !have[id] {
			t.Fatalf("acknowledged signal %s missing after a SIGTERM restart", id)
		}
	}
	t.Logf("%d signals acknowledged, all present after restart", len(acked))
}
