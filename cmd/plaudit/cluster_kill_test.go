package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// clusterNode is one `plaudit serve --cluster` process of a test cluster.
type clusterNode struct {
	*plaudit
	name, data string
	flags      []string
}

// startClusterNodes starts n nodes at once (each waits for the cluster's
// JetStream), then waits for every one to answer /healthz. A node that
// finds one of its ports taken (freeport's ports are free when found, and
// another test process may take one before the node binds it) starts the
// cluster again, on other ports.
func startClusterNodes(t *testing.T, bin string, n int) []*clusterNode {
	t.Helper()
	for try := 1; ; try++ {
		nodes := launchClusterNodes(t, bin, n)
		ps := make([]*plaudit, len(nodes))
		for i, nd := range nodes {
			ps[i] = nd.plaudit
		}
		err := healthy(60*time.Second, ps...)
		if err == nil {
			return nodes
		}
		for _, nd := range nodes {
			select {
			case <-nd.waitCh: // exited too
				nd.killed = true
			case <-time.After(100 * time.Millisecond):
				nd.kill(t)
			}
		}
		if !strings.Contains(err.Error(), portTaken) || try == 3 {
			t.Fatal(err)
		}
		t.Logf("a port was taken before its node bound it; the cluster starts again on others: %v", err)
	}
}

// portTaken is what a node logs of a port it could not bind.
const portTaken = "address already in use"

// launchClusterNodes starts n nodes of a cluster without waiting for them.
func launchClusterNodes(t *testing.T, bin string, n int) []*clusterNode {
	t.Helper()
	routes := make([]string, n)
	for i := range routes {
		routes[i] = freeAddr(t)
	}
	// A 3s lease (the default is 6s) keeps the pause below nats-server's
	// 10s lost-quorum interval: longer pauses have left a partition's
	// stream leaderless for a minute on this machine (docs/cluster.md).
	nodes := make([]*clusterNode, n)
	for i := range nodes {
		nodes[i] = &clusterNode{name: fmt.Sprintf("n%d", i), data: t.TempDir(),
			flags: []string{"--cluster", "test", "--node", fmt.Sprintf("n%d", i), "--nats-cluster-listen", routes[i],
				"--nats-routes", strings.Join(routes, ","), "--partitions", "16", "--lease-ttl", "3s",
				"--claim-window", "4s"}}
		nodes[i].plaudit = launch(t, bin, nodes[i].data, nodes[i].name, nodes[i].flags...)
	}
	return nodes
}

// createRetrying posts body to url until it is answered 201 and returns
// the id made. A 503 (a partition between owners, while the nodes share the
// partitions out after they start) is retried, as the contract asks of a
// client; any other answer fails the test.
func createRetrying(t *testing.T, hc *http.Client, url, body string) string {
	t.Helper()
	for try := 0; ; try++ {
		status, resp, err := post(hc, url, body)
		if err == nil && status == 201 {
			var m struct{ ID string }
			if err := json.Unmarshal(resp, &m); err != nil || m.ID == "" {
				t.Fatalf("POST %s: %s: no id", url, resp)
			}
			return m.ID
		}
		if (err == nil && status != 503) || try > 200 {
			t.Fatalf("POST %s: %d %s %v", url, status, resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// keyedRun is a run made by a keyed request: the request, and the 201 that
// answered it.
type keyedRun struct {
	agent, run string
	write      keyedWrite
	answer     keyedAnswer
}

// getRetrying GETs url as a client would, retrying 503 (a handover) for
// up to a minute.
func getRetrying(hc *http.Client, url string) (int, []byte, error) {
	for began := time.Now(); ; time.Sleep(500 * time.Millisecond) {
		status, b, err := getOnce(hc, url)
		if status != 503 || err != nil || time.Since(began) > time.Minute {
			return status, b, err
		}
	}
}

// getOnce GETs url with the admin key.
func getOnce(hc *http.Client, url string) (int, []byte, error) { return rawRequest(hc, "GET", url, "") }

// launch runs `plaudit serve` with flags on free ports without waiting.
func launch(t *testing.T, bin, data, name string, flags ...string) *plaudit {
	t.Helper()
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	args := append([]string{"serve", "--data", data, "--http", httpAddr, "--nats-listen", natsAddr, "--log-level", "warn"}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "PLAUDIT_BOOTSTRAP_KEY="+killTestKey, "PLAUDIT_CLUSTER_SECRET=test-route-secret")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	p := &plaudit{cmd: cmd, base: "http://" + httpAddr, nats: "nats://" + natsAddr, log: logPath, waitCh: make(chan error, 1)}
	go func() { p.waitCh <- cmd.Wait() }()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() { // what CI keeps of a failed run is the test's output
			t.Logf("%s's log, its last %d lines:\n%s", name, logTail, lastLines(p.output(), logTail))
		}
	})
	return p
}

// logTail is how much of each process's log a failed test prints.
const logTail = 30

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (p *plaudit) waitHealthy(t *testing.T, within time.Duration) {
	t.Helper()
	if err := healthy(within, p); err != nil {
		t.Fatal(err)
	}
}

// healthy waits until every one of ps answers /healthz, and fails as soon
// as one exits (the others of a cluster cannot then form it).
func healthy(within time.Duration, ps ...*plaudit) error {
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		var unhealthy []*plaudit
		for _, p := range ps {
			select {
			case err := <-p.waitCh:
				p.killed = true
				return fmt.Errorf("%s exited before it was healthy: %v\n%s", p.logName(), err, p.output())
			default:
			}
			if !p.answersHealthz() {
				unhealthy = append(unhealthy, p)
			}
		}
		if len(unhealthy) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy after %v\n%s", unhealthy[0].logName(), within, unhealthy[0].output())
		}
	}
}

// logName is the name the process was launched under, its log file's.
func (p *plaudit) logName() string { return strings.TrimSuffix(filepath.Base(p.log), ".log") }

// answersHealthz reports whether the process answers /healthz 200 within
// a second (a node still joining its cluster may take the connection and
// answer only once it gives up).
func (p *plaudit) answersHealthz() bool {
	resp, err := (&http.Client{Timeout: time.Second}).Get(p.base + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// history records, as a Jepsen-style checker would, every acknowledged
// signal and every read, and finds loss, duplication and stale reads.
type history struct {
	mu    sync.Mutex
	acked map[string]string // signal id → dedup key, acknowledged 201
	// stale lists reads that missed a signal acknowledged to the same
	// client before the read began.
	stale []string
}

// signalIDs reads the ids and dedup keys of a run's signals from node base.
func signalIDs(hc *http.Client, base, agent, run string) (map[string]string, error) {
	req, err := http.NewRequest("GET", base+"/api/v1/agents/"+agent+"/runs/"+run+"/signals", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+killTestKey)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var list struct {
		Items []struct {
			ID       string `json:"id"`
			DedupKey string `json:"dedup_key"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, it := range list.Items {
		if prev, dup := out[it.ID]; dup {
			return nil, fmt.Errorf("signal %s listed twice (%s, %s)", it.ID, prev, it.DedupKey)
		}
		out[it.ID] = it.DedupKey
	}
	return out, nil
}

// TestClusterKill9LosesNothingAcknowledged: three nodes in separate
// processes, writers on every node, one node killed with SIGKILL mid-load.
// Its partitions are taken by the others within the bound, every
// acknowledged write (signals, reports, feedback, runs made with an
// Idempotency-Key and an external id) is readable from every node
// afterwards (and from the killed node once it rejoins), none is stored
// twice, and no read missed a signal acknowledged before it began.
func TestClusterKill9LosesNothingAcknowledged(t *testing.T) {
	clusterUnderFault(t, false)
}

// TestClusterPausedNodeLosesNothingAcknowledged: as above, with the node
// paused (SIGSTOP) well past its leases instead, then resumed. Whatever it
// was doing when it stopped, its late writes must not fork the log: the
// history shows no loss, no duplicate and no stale read, on every node.
func TestClusterPausedNodeLosesNothingAcknowledged(t *testing.T) {
	clusterUnderFault(t, true)
}

// clusterUnderFault runs writers and readers against three nodes while one
// is killed (or paused, then resumed), and checks the history.
func clusterUnderFault(t *testing.T, pause bool) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster; skipped with -short")
	}
	bin := buildPlaudit(t)
	nodes := startClusterNodes(t, bin, 3)
	hc := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()

	// Two agents made on each node (each lives in its maker's partitions),
	// one run each. A node may own no partition for a moment after start.
	type target struct{ agent, run string }
	var targets []target
	for i, nd := range nodes {
		for j := range 2 {
			agent := createRetrying(t, hc, nd.base+"/api/v1/agents", fmt.Sprintf(`{"name": "n%d-%d"}`, i, j))
			run := createRetrying(t, hc, nd.base+"/api/v1/agents/"+agent+"/runs", `{"version": "1"}`)
			targets = append(targets, target{agent, run})
		}
	}

	h := &history{acked: map[string]string{}}
	var (
		stop   atomic.Bool
		dead   atomic.Int32 // index of the killed node + 1; 0 while all live
		wg     sync.WaitGroup
		failed atomic.Int64
		// killedAt is when the kill was sent (Unix ns); movedAt when a
		// write to an agent made on the killed node, sent after it, was
		// first acknowledged.
		killedAt atomic.Int64
		movedMu  sync.Mutex
		movedAt  time.Time
	)
	// The victim leads the directory's stream: every keyed write then
	// waits for JetStream to elect another leader, and the claims made
	// around the fault must not keep an id from its retries.
	victim := directoryLeader(t, hc, nodes)
	t.Logf("the victim, %s, leads the directory", nodes[victim].name)
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			mine := map[string]map[string]bool{} // run → ids this writer had acknowledged
			for i := 0; !stop.Load(); i++ {
				tg := targets[rnd.IntN(len(targets))]
				nd := rnd.IntN(len(nodes))
				if int(dead.Load()) == nd+1 {
					nd = (nd + 1) % len(nodes)
				}
				sent := time.Now().UnixNano()
				key := fmt.Sprintf("w%02d-%06d", w, i)
				body := fmt.Sprintf(`{"kind": "load.test", "value": 1, "run_id": %q, "dedup_key": %q}`, tg.run, key)
				status, resp, err := post(hc, nodes[nd].base+"/api/v1/agents/"+tg.agent+"/signals", body)
				if err != nil || status != 201 {
					failed.Add(1)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				var m struct{ ID string }
				if json.Unmarshal(resp, &m) != nil || m.ID == "" {
					t.Errorf("201 without a signal id: %s", resp)
					continue
				}
				h.mu.Lock()
				h.acked[m.ID] = key
				h.mu.Unlock()
				if mine[tg.run] == nil {
					mine[tg.run] = map[string]bool{}
				}
				mine[tg.run][m.ID] = true
				if k := killedAt.Load(); k != 0 && sent > k && (tg == targets[2*victim] || tg == targets[2*victim+1]) {
					movedMu.Lock()
					if movedAt.IsZero() {
						movedAt = time.Now()
					}
					movedMu.Unlock()
				}
				// Every tenth write, read the run back from a random live
				// node: it must show everything this writer had acknowledged.
				if i%10 == 0 {
					rd := rnd.IntN(len(nodes))
					if int(dead.Load()) == rd+1 {
						rd = (rd + 1) % len(nodes)
					}
					got, err := signalIDs(hc, nodes[rd].base, tg.agent, tg.run)
					if err != nil {
						if strings.Contains(err.Error(), "listed twice") {
							t.Errorf("read from n%d: %v", rd, err)
						}
						continue
					}
					for id := range mine[tg.run] {
						if _, ok := got[id]; !ok {
							h.mu.Lock()
							h.stale = append(h.stale, fmt.Sprintf("n%d missed %s of run %s", rd, id, tg.run))
							h.mu.Unlock()
						}
					}
				}
			}
		}()
	}
	// Two writers create runs with external ids as a client who must not
	// make one twice would: each id sent with an Idempotency-Key (so its
	// 201 means durable), to any live node, until it is answered 201.
	// A try that failed after claiming its id must not keep the id from
	// its retries (the claim window is 4s here).
	var (
		extMu  sync.Mutex
		extRun = map[string]keyedRun{} // external id → its request and the 201 that answered it
	)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(100+w), 7))
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("x%d-%05d", w, i)
				tg := targets[rnd.IntN(len(targets))]
				write := keyedWrite{path: "/api/v1/agents/" + tg.agent + "/runs", key: id,
					body: fmt.Sprintf(`{"version": "1", "external_id": %q}`, id)}
				var last string
				for began := time.Now(); ; {
					nd := rnd.IntN(len(nodes))
					if int(dead.Load()) == nd+1 {
						nd = (nd + 1) % len(nodes)
					}
					a, err := postKeyed(hc, nodes[nd].base, write)
					if err == nil && a.status == 201 {
						var m struct{ ID string }
						if json.Unmarshal(a.body, &m) != nil || m.ID == "" {
							t.Errorf("external id %s: 201 without a run id: %s", id, a.body)
						}
						extMu.Lock()
						extRun[id] = keyedRun{tg.agent, m.ID, write, a}
						extMu.Unlock()
						break
					}
					last = fmt.Sprintf("%d %s %v", a.status, a.body, err)
					if time.Since(began) > time.Minute {
						t.Errorf("external id %s: not created in a minute of retries; last answer %s", id, last)
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	// Two writers send evidence on the runs, reports (a scorer of their own
	// each, so none replaces another) and feedback in turn; every one
	// acknowledged must be listed once on every live node afterwards.
	var (
		evMu     sync.Mutex
		evidence = map[string]map[string]bool{} // run → acknowledged report and feedback ids
	)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(200+w), 7))
			for i := 0; !stop.Load(); i++ {
				tg := targets[rnd.IntN(len(targets))]
				nd := rnd.IntN(len(nodes))
				if int(dead.Load()) == nd+1 {
					nd = (nd + 1) % len(nodes)
				}
				path, body, want := "/v1/jobs/"+tg.run+"/rewards",
					fmt.Sprintf(`{"kind": "external", "scorer": "e%d.s%06d", "value": 0.5}`, w, i), 201
				if i%2 == 1 {
					path, body, want = "/v1/workspaces/default/objectives/"+tg.run+"/feedback",
						`{"metadata": {}, "data": {"score": 1}}`, 200
				}
				status, resp, err := post(hc, nodes[nd].base+path, body)
				if err != nil || status != want {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				var m struct {
					ID       string
					Metadata struct{ ID string }
				}
				if json.Unmarshal(resp, &m) != nil || m.ID+m.Metadata.ID == "" {
					t.Errorf("%d without an id: %s", status, resp)
					continue
				}
				evMu.Lock()
				if evidence[tg.run] == nil {
					evidence[tg.run] = map[string]bool{}
				}
				evidence[tg.run][m.ID+m.Metadata.ID] = true
				evMu.Unlock()
			}
		}()
	}
	time.Sleep(2 * time.Second)
	dead.Store(int32(victim) + 1)
	killedAt.Store(time.Now().UnixNano())
	if pause {
		nodes[victim].pause(t, true)
	} else {
		nodes[victim].kill(t)
	}
	// Writers go on until the victim's agents accept writes again (a
	// loaded machine slows JetStream's elections) and a survivor sees every
	// partition owned by a live node, for 8 s after the fault at least.
	var (
		ownedAt    time.Time
		lastOwners []*string
	)
	survivor := nodes[(victim+1)%len(nodes)]
	for wait := time.Now().Add(40 * time.Second); time.Now().Before(wait); time.Sleep(250 * time.Millisecond) {
		if ownedAt.IsZero() {
			// The status must answer throughout the fault: it answered 500
			// after 10 s while the victim, leading the directory, was lost.
			var st struct{ Owners []*string }
			status, body, err := getOnce(hc, survivor.base+"/v1/cluster")
			switch {
			case err != nil || status != 200:
				t.Errorf("%s's /v1/cluster during the fault: %d %s %v", survivor.name, status, body, err)
			case json.Unmarshal(body, &st) == nil:
				lastOwners = st.Owners
				if len(st.Owners) > 0 && !slices.ContainsFunc(st.Owners, func(o *string) bool { return o == nil || *o == nodes[victim].name }) {
					ownedAt = time.Now()
				}
			}
		}
		movedMu.Lock()
		moved := !movedAt.IsZero()
		movedMu.Unlock()
		if moved && !ownedAt.IsZero() && time.Since(time.Unix(0, killedAt.Load())) > 8*time.Second {
			break
		}
	}
	if ownedAt.IsZero() {
		t.Errorf("%s did not see every partition owned by a live node in the 40s after the fault: owners %s", survivor.name, ownerNames(lastOwners))
	} else {
		t.Logf("%s saw every partition owned by a live node %v after the fault", survivor.name, ownedAt.Sub(time.Unix(0, killedAt.Load())).Round(time.Millisecond))
	}
	if pause {
		// Resumed under load: it finds its leases gone, and whatever it
		// had in hand must fail, not land.
		nodes[victim].pause(t, false)
		dead.Store(0)
		time.Sleep(3 * time.Second)
	}
	stop.Store(true)
	wg.Wait()
	acked := 0
	for _, ids := range evidence {
		acked += len(ids)
	}
	if len(h.acked) == 0 || len(extRun) == 0 || acked == 0 {
		t.Fatalf("%d signals, %d runs with external ids and %d reports and feedback acknowledged", len(h.acked), len(extRun), acked)
	}
	movedMu.Lock()
	moved := movedAt.Sub(time.Unix(0, killedAt.Load()))
	movedMu.Unlock()
	t.Logf("%d signals, %d runs with external ids and %d reports and feedback acknowledged, %d signals not; the killed node's agents wrote again %v after the kill",
		len(h.acked), len(extRun), acked, failed.Load(), moved.Round(time.Millisecond))
	// The lease (3s here) and JetStream's own leader elections (4-9s in
	// nats-server) bound the failover; on this machine it took 3-9s, more
	// with other tests running beside. The bound checked catches a
	// failover that never comes; the figures are in docs/cluster.md.
	if movedAt.IsZero() {
		t.Errorf("the killed node's agents accepted no write in the 40s after the fault")
	}
	for _, s := range h.stale {
		t.Errorf("stale read: %s", s)
	}

	// Every acknowledged signal, from every live node, once.
	check := func(label string, live []int) {
		t.Helper()
		for _, i := range live {
			seen := map[string]bool{}
			for _, tg := range targets {
				// As a client would: a 503 during a handover is retried.
				// After a pause, JetStream's replicas of a stream the
				// paused node led have been seen to take 15s to agree on a
				// leader again on this machine.
				began := time.Now()
				got, err := signalIDs(hc, nodes[i].base, tg.agent, tg.run)
				for err != nil && strings.Contains(err.Error(), "status 503") && time.Since(began) < time.Minute {
					time.Sleep(500 * time.Millisecond)
					got, err = signalIDs(hc, nodes[i].base, tg.agent, tg.run)
				}
				if wait := time.Since(began); wait > 5*time.Second {
					t.Logf("%s: reading run %s from n%d was answered 503 for %v", label, tg.run, i, wait.Round(time.Millisecond))
				}
				if err != nil {
					for j, nd := range nodes {
						t.Logf("%s's log:\n%s", nd.name, nd.output())
						if slices.Contains(live, j) {
							status, body, err := getOnce(hc, nd.base+"/v1/cluster")
							t.Logf("%s's GET /v1/cluster: %d %s %v", nd.name, status, body, err)
						}
					}
					t.Fatalf("%s: reading run %s from n%d: %v", label, tg.run, i, err)
				}
				keys := map[string]string{}
				for id, key := range got {
					seen[id] = true
					if key == "" {
						continue // a feedback's signal
					}
					if other, dup := keys[key]; dup {
						t.Errorf("%s: n%d: dedup key %s stored twice, as %s and %s", label, i, key, other, id)
					}
					keys[key] = id
				}
			}
			lost := 0
			for id := range h.acked {
				if !seen[id] {
					lost++
				}
			}
			if lost > 0 {
				t.Errorf("%s: n%d lacks %d of %d acknowledged signals", label, i, lost, len(h.acked))
			}
			// Every acknowledged report and feedback, once.
			for _, tg := range targets {
				status, body, err := getRetrying(hc, nodes[i].base+"/v1/jobs/"+tg.run+"/rewards")
				var page struct{ Items []struct{ ID string } }
				if err != nil || status != 200 || json.Unmarshal(body, &page) != nil {
					t.Errorf("%s: n%d: evidence of run %s: %d %s %v", label, i, tg.run, status, body, err)
					continue
				}
				listed := map[string]bool{}
				for _, it := range page.Items {
					if listed[it.ID] {
						t.Errorf("%s: n%d: run %s lists %s twice", label, i, tg.run, it.ID)
					}
					listed[it.ID] = true
				}
				missing := 0
				for id := range evidence[tg.run] {
					if !listed[id] {
						missing++
					}
				}
				if missing > 0 {
					t.Errorf("%s: n%d: run %s lacks %d of its %d acknowledged reports and feedback", label, i, tg.run, missing, len(evidence[tg.run]))
				}
			}
			// Every run made with an external id is found by it, and its
			// request sent again is answered from its Idempotency-Key
			// record: the same answer, byte for byte.
			for ext, kr := range extRun {
				path := "/api/v1/agents/" + kr.agent + "/runs/external_id:" + ext
				status, body, err := getRetrying(hc, nodes[i].base+path)
				var m struct{ ID string }
				if err != nil || status != 200 || json.Unmarshal(body, &m) != nil || m.ID != kr.run {
					t.Errorf("%s: n%d: run by external id %s: %d %s %v; want run %s", label, i, ext, status, body, err, kr.run)
				}
				again, err := postKeyed(hc, nodes[i].base, kr.write)
				for began := time.Now(); err == nil && again.status == 503 && time.Since(began) < time.Minute; {
					time.Sleep(500 * time.Millisecond)
					again, err = postKeyed(hc, nodes[i].base, kr.write)
				}
				if diff := sameKeyed(kr.answer, again); err != nil || diff != "" {
					t.Errorf("%s: n%d: the keyed request of external id %s sent again: %s %v", label, i, ext, diff, err)
				}
			}
		}
	}
	if pause {
		check("after the pause", []int{0, 1, 2})
		return
	}
	var survivors []int
	for i := range nodes {
		if i != victim {
			survivors = append(survivors, i)
		}
	}
	check("after the kill", survivors)

	// The killed node's data directory, as `plaudit inspect` sees it: its
	// copies of the cluster's streams, the partitions' logs among them.
	code, out, stderr := runArgs("inspect", "--json", "--data", nodes[victim].data)
	var rep struct {
		Cluster *struct {
			Streams []struct {
				Name, Holds string
				Bytes       int64
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.Cluster == nil {
		t.Fatalf("inspect of the killed node: exit %d, %v, %s %s", code, err, out, stderr)
	}
	logs, dir := 0, false
	for _, st := range rep.Cluster.Streams {
		logs += strings.Count(st.Holds, "event log")
		dir = dir || (st.Name == "PLAUDIT_DIR" && st.Bytes > 0)
	}
	if logs != 16 || !dir {
		t.Errorf("inspect of the killed node shows %d partition logs (want 16) and the directory %v: %s", logs, dir, out)
	}

	// The killed node rejoins on its data directory and serves them too.
	nodes[victim].plaudit = launch(t, bin, nodes[victim].data, nodes[victim].name+"-again", nodes[victim].flags...)
	nodes[victim].waitHealthy(t, 60*time.Second)
	check("after the rejoin", []int{0, 1, 2})
}

// directoryLeader returns the index of the node whose copy of the
// directory's stream leads, as GET /v1/cluster shows it.
func directoryLeader(t *testing.T, hc *http.Client, nodes []*clusterNode) int {
	t.Helper()
	for began := time.Now(); time.Since(began) < 30*time.Second; time.Sleep(200 * time.Millisecond) {
		status, body, err := getOnce(hc, nodes[0].base+"/v1/cluster")
		var st struct{ Directory struct{ Leader *string } }
		if err != nil || status != 200 || json.Unmarshal(body, &st) != nil || st.Directory.Leader == nil {
			continue
		}
		for i, nd := range nodes {
			if nd.name == *st.Directory.Leader {
				return i
			}
		}
		t.Fatalf("the directory's leader %q is none of the nodes: %s", *st.Directory.Leader, body)
	}
	t.Fatal("no node led the directory's stream in 30s")
	return 0
}

// ownerNames renders /v1/cluster's owners for a message ("-" for none).
func ownerNames(owners []*string) string {
	names := make([]string, len(owners))
	for i, o := range owners {
		names[i] = "-"
		if o != nil {
			names[i] = *o
		}
	}
	return strings.Join(names, " ")
}

// pause stops (SIGSTOP) or resumes (SIGCONT) a node's process.
func (p *plaudit) pause(t *testing.T, stop bool) {
	t.Helper()
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v: %v", sig, err)
	}
}
