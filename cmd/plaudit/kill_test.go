package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/plaudit/plaudit/internal/freeport"
)

const killTestKey = "pl_kill_test_admin_key_0123456789"

// TestKill9LosesNoAcknowledgedSignal: 32 writers post signals with unique
// dedup keys while the server is SIGKILLed mid-stream. After a restart on
// the same data directory every signal that was answered 201 is readable
// on its run, and re-posting its dedup_key answers the same signal with
// "duplicate": true.
func TestKill9LosesNoAcknowledgedSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it; skipped with -short")
	}
	start := time.Now()
	bin := buildPlaudit(t)
	t.Logf("built in %v", time.Since(start).Round(time.Millisecond))
	data := t.TempDir()
	hc := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{MaxIdleConns: 128, MaxIdleConnsPerHost: 128}}
	defer hc.CloseIdleConnections()

	srv := startPlaudit(t, bin, data, "first")
	api := &kclient{t: t, hc: hc, base: srv.base}
	agent := api.id(api.must(201, "POST", "/api/v1/agents", `{"name": "kill-9"}`))
	var runs []string
	for i := 0; i < 4; i++ {
		runs = append(runs, api.id(api.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{"version": "1"}`)))
	}
	// Acknowledged claims, traces, a finish and an objective version must
	// survive the kill too.
	api.must(201, "POST", "/api/v1/agents/"+agent+"/runs/"+runs[0]+"/claims", `{"object": "zendesk.ticket/42"}`)
	api.must(201, "POST", "/api/v1/agents/"+agent+"/runs/"+runs[0]+"/traces", `{"trace_id": "tr-1"}`)
	api.must(200, "POST", "/api/v1/agents/"+agent+"/runs/"+runs[1]+"/finish", `{"succeeded": true}`)
	api.must(200, "PUT", "/api/v1/agents/"+agent+"/objective", `{"definition": {"terms": [{"signal": "load.test", "weight": 1, "agg": "count"}]}}`)
	runBefore := api.mustRaw(200, "GET", "/api/v1/agents/"+agent+"/runs/"+runs[0], "")
	finishedBefore := api.mustRaw(200, "GET", "/api/v1/agents/"+agent+"/runs/"+runs[1], "")
	objectiveBefore := api.mustRaw(200, "GET", "/api/v1/agents/"+agent+"/objective/versions/1", "")

	type ack struct{ run, body, id string }
	var (
		mu      sync.Mutex
		acked   []ack
		stop    atomic.Bool
		wg      sync.WaitGroup
		refused atomic.Int64 // requests that failed: expected only after the kill
	)
	signalsURL := srv.base + "/api/v1/agents/" + agent + "/signals"
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				run := runs[(g+i)%len(runs)]
				body := fmt.Sprintf(`{"kind": "load.test", "value": %d, "run_id": %q, "dedup_key": "w%02d-%06d"}`, i, run, g, i)
				status, resp, err := post(hc, signalsURL, body)
				if err != nil {
					refused.Add(1)
					time.Sleep(time.Millisecond)
					continue
				}
				if status != 201 {
					continue // e.g. 503 overloaded: not acknowledged, may or may not exist
				}
				var m struct{ ID string }
				if json.Unmarshal(resp, &m) != nil || m.ID == "" {
					t.Errorf("201 without a signal id: %s", resp)
					continue
				}
				mu.Lock()
				acked = append(acked, ack{run: run, body: body, id: m.ID})
				mu.Unlock()
			}
		}()
	}
	srv.killUnderLoad(t, &stop, &wg)
	if len(acked) == 0 {
		t.Fatal("no signal was acknowledged before the kill")
	}
	t.Logf("%d signals acknowledged before SIGKILL; %d requests failed", len(acked), refused.Load())

	restarted := time.Now()
	srv = startPlaudit(t, bin, data, "second")
	api = &kclient{t: t, hc: hc, base: srv.base}
	for path, before := range map[string][]byte{
		"/runs/" + runs[0]:      runBefore,
		"/runs/" + runs[1]:      finishedBefore,
		"/objective/versions/1": objectiveBefore,
	} {
		if after := api.mustRaw(200, "GET", "/api/v1/agents/"+agent+path, ""); string(after) != string(before) {
			t.Errorf("%s after kill -9:\n%s\nwant\n%s", path, after, before)
		}
	}
	stored := map[string]map[string]bool{} // run → signal ids
	for _, r := range runs {
		stored[r] = map[string]bool{}
		var list struct{ Items []struct{ ID string } }
		if err := json.Unmarshal(api.mustRaw(200, "GET", "/api/v1/agents/"+agent+"/runs/"+r+"/signals", ""), &list); err != nil {
			t.Fatalf("signals of %s: %v", r, err)
		}
		for _, it := range list.Items {
			stored[r][it.ID] = true
		}
	}
	lost := 0
	for _, a := range acked {
		if !stored[a.run][a.id] {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged signal %s (%s) is not on run %s after restart", a.id, a.body, a.run)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged signals lost", lost, len(acked))
	}

	// Every dedup key is still known: re-posting answers the stored signal.
	work := make(chan ack)
	var notDup atomic.Int64
	signalsURL = srv.base + "/api/v1/agents/" + agent + "/signals"
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				status, resp, err := post(hc, signalsURL, a.body)
				var m struct {
					ID        string
					Duplicate bool
				}
				if err == nil {
					err = json.Unmarshal(resp, &m)
				}
				if err != nil || status != 200 || !m.Duplicate || m.ID != a.id {
					if notDup.Add(1) <= 5 {
						t.Errorf("re-post of %s: status %d, err %v, body %s; want 200 duplicate of %s", a.body, status, err, resp, a.id)
					}
				}
			}
		}()
	}
	for _, a := range acked {
		work <- a
	}
	close(work)
	wg.Wait()
	if n := notDup.Load(); n > 0 {
		t.Errorf("%d of %d acknowledged dedup keys were not answered as duplicates", n, len(acked))
	}
	t.Logf("restarted and verified in %v", time.Since(restarted).Round(time.Millisecond))
}

// buildPlaudit builds this command into a temporary directory.
func buildPlaudit(t *testing.T) string {
	t.Helper()
	goBin := "go"
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			goBin = p
		}
	}
	bin := filepath.Join(t.TempDir(), "plaudit")
	out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// plaudit is a running `plaudit serve` process.
type plaudit struct {
	cmd    *exec.Cmd
	base   string
	nats   string // the embedded NATS server's URL
	log    string
	waitCh chan error // receives cmd.Wait's result once the process is gone
	killed bool
}

// startPlaudit runs `plaudit serve` on free loopback ports, with any
// further flags, and waits for /healthz to answer 200.
func startPlaudit(t *testing.T, bin, data, name string, flags ...string) *plaudit {
	t.Helper()
	p := launch(t, bin, data, name, flags...)
	p.waitHealthy(t, 15*time.Second)
	return p
}

func (p *plaudit) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// killUnderLoad lets the writers run for a second, SIGKILLs the process
// while they are still writing, then stops them and waits for them.
func (p *plaudit) killUnderLoad(t *testing.T, stop *atomic.Bool, writers *sync.WaitGroup) {
	t.Helper()
	time.Sleep(time.Second)
	p.kill(t)
	time.Sleep(100 * time.Millisecond)
	stop.Store(true)
	writers.Wait()
}

// kill SIGKILLs the process and waits for it to be gone.
func (p *plaudit) kill(t *testing.T) {
	t.Helper()
	if p.killed {
		return
	}
	p.killed = true
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Errorf("SIGKILL: %v", err)
	}
	select {
	case <-p.waitCh:
	case <-time.After(10 * time.Second):
		t.Errorf("process did not exit 10s after SIGKILL")
	}
}

// freeAddr is a loopback address free a moment ago, for a child's flags.
func freeAddr(t *testing.T) string {
	t.Helper()
	addrs, err := freeport.Addrs(1)
	if err != nil {
		t.Fatal(err)
	}
	return addrs[0]
}

func post(hc *http.Client, url, body string) (int, []byte, error) {
	return rawRequest(hc, "POST", url, body)
}

// rawRequest sends one request with the admin key (and body, as JSON, unless
// empty) and returns the answer's status and body.
func rawRequest(hc *http.Client, method, url, body string) (int, []byte, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+killTestKey)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// kclient makes setup calls that must succeed.
type kclient struct {
	t    *testing.T
	hc   *http.Client
	base string
}

func (c *kclient) mustRaw(want int, method, path, body string) []byte {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+killTestKey)
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, bytes.TrimSpace(b))
	}
	return b
}

func (c *kclient) must(want int, method, path, body string) map[string]any {
	c.t.Helper()
	var m map[string]any
	if err := json.Unmarshal(c.mustRaw(want, method, path, body), &m); err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return m
}

func (c *kclient) id(m map[string]any) string {
	c.t.Helper()
	id, _ := m["id"].(string)
	if id == "" {
		c.t.Fatalf("no id in %v", m)
	}
	return id
}
