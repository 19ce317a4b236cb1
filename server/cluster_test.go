package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/cluster"
	"github.com/plaudit/plaudit/internal/freeport"
	"github.com/plaudit/plaudit/internal/jstest"
	"github.com/plaudit/plaudit/persist/jslog"
)

// taskPlacementKey is how a cluster places a task's judged rewards (see
// transport/api's taskPlacement).
func taskPlacementKey(ws, task string) string { return "task/" + ws + "/" + task }

// natsMode is how a test cluster's nodes reach each other: their
// embedded NATS servers routed together, or an existing NATS cluster.
type natsMode string

const (
	embeddedNATS natsMode = "embedded NATS"
	externalNATS natsMode = "external NATS"
)

// startCluster starts n servers as one cluster, in this process, on
// loopback ports: their embedded NATS servers routed together, JetStream
// holding leases, log and directory. They start at once: each waits for
// the cluster's JetStream to have a leader.
func startCluster(t *testing.T, n int) []*Server {
	t.Helper()
	return startClusterOn(t, n, embeddedNATS)
}

// startClusterOn starts n servers as startCluster does, on NATS as mode
// says; on an external one, node i connects to server i of n.
func startClusterOn(t *testing.T, n int, mode natsMode) []*Server {
	t.Helper()
	if _, err := theOpenAPI(); err != nil {
		t.Fatal(err)
	}
	var urls []string
	if mode == externalNATS {
		urls = jstest.ClusterURLs(t, n)
	}
	routes, err := freeport.Addrs(n)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0",
				Logger:       slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", i),
				BootstrapKey: adminKey, Cluster: &ClusterConfig{Name: "test", Node: fmt.Sprintf("n%d", i),
					Listen: routes[i], Routes: routes, Secret: "route-secret", Partitions: 8},
				// Room for a handover on a machine busy with other tests.
				RequestDeadline: 20 * time.Second}
			if mode == externalNATS {
				cfg.NATSURL = urls[i]
				cfg.Cluster.Listen, cfg.Cluster.Routes, cfg.Cluster.Secret = "", nil, ""
			}
			servers[i], errs[i] = Start(cfg)
		}()
	}
	wg.Wait()
	t.Logf("%d nodes started after %v", n, time.Since(started))
	// Closed together: closed one by one, the last ones would wait on a
	// JetStream that lost its quorum to hand their partitions over.
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, s := range servers {
			if s != nil {
				wg.Add(1)
				go func() { defer wg.Done(); _ = s.Close() }()
			}
		}
		wg.Wait()
	})
	for i := range servers {
		if errs[i] != nil {
			t.Fatalf("node n%d: %v", i, errs[i])
		}
	}
	// Every partition owned, each node holding its share (8 among n), and
	// none above it: a node above its share hands partitions over to one
	// below, and a request forwarded to it meanwhile may be answered 503.
	deadline := time.Now().Add(60 * time.Second)
	share := (8 + n - 1) / n
	for {
		owned, least, most := 0, 8, 0
		for _, s := range servers {
			mine := len(s.cluster.leases.Owned())
			owned, least, most = owned+mine, min(least, mine), max(most, mine)
		}
		if owned == 8 && least >= 8/n && most <= share {
			t.Logf("cluster of %d ready after %v", n, time.Since(started))
			return servers
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 8 partitions owned, the fewest by one node %d, the most %d, after 60s", owned, least, most)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestEveryNodeOfAClusterServesEveryAgent(t *testing.T) {
	for _, mode := range []natsMode{embeddedNATS, externalNATS} {
		t.Run(string(mode), func(t *testing.T) { everyNodeServesEveryAgent(t, mode) })
	}
}

func everyNodeServesEveryAgent(t *testing.T, mode natsMode) {
	nodes := startClusterOn(t, 3, mode)
	c := make([]*client, len(nodes))
	for i, s := range nodes {
		c[i] = newClient(t, s, adminKey)
	}
	began := time.Now()
	defer func() { t.Logf("requests took %v", time.Since(began)) }()
	// An agent and a run made on each node, signals sent to every node.
	type agentRun struct{ agent, run string }
	var made []agentRun
	for i := range nodes {
		agent := str(t, c[i].must(201, "POST", "/api/v1/agents", fmt.Sprintf(`{"name": "made-on-%d"}`, i)), "id")
		run := str(t, c[(i+1)%3].must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{"version": "1"}`), "id")
		made = append(made, agentRun{agent, run})
	}
	for _, ar := range made {
		for j := range nodes {
			c[j].must(201, "POST", "/api/v1/agents/"+ar.agent+"/signals",
				fmt.Sprintf(`{"kind": "human.rating", "value": 4, "run_id": %q, "dedup_key": "from-%d"}`, ar.run, j))
		}
	}
	// A seed-001 report replaced through every node in turn: the one that
	// started last stands (each node stamps what it admits, and the stamp
	// travels with a forwarded request), so every replacement is 201.
	for round := range 2 {
		for j := range nodes {
			body := fmt.Sprintf(`{"scorer": "grader", "value": 0.%d%d}`, round, j)
			c[j].must(201, "POST", "/v1/jobs/"+made[0].run+"/rewards", body)
		}
	}
	t.Logf("writes took %v", time.Since(began))
	// Every node reads every signal, whichever node it went to.
	for _, ar := range made {
		for j := range nodes {
			items := list(t, c[j].must(200, "GET", "/api/v1/agents/"+ar.agent+"/runs/"+ar.run+"/signals", ""), "items")
			if len(items) != 3 {
				t.Fatalf("node n%d reads %d signals of agent %s, want 3", j, len(items), ar.agent)
			}
		}
	}
	// Seed 004 names the agent in the body: an objective (a run) made
	// through every node for every agent, and each agent's feedback listed
	// alike by every node, its query arguments (includeInfo) forwarded.
	for _, ar := range made {
		for j := range nodes {
			c[j].must(200, "POST", "/v1/workspaces/default/objectives", fmt.Sprintf(`{"spec": {"agentId": %q}}`, ar.agent))
		}
		c[0].must(200, "POST", "/v1/workspaces/default/objectives/"+ar.run+"/feedback", `{"metadata": {}, "data": {"score": 1}}`)
		var first string
		for j := range nodes {
			got := fmt.Sprint(c[j].must(200, "GET", "/v1/workspaces/default/agents/"+ar.agent+"/feedback?includeInfo=true", ""))
			if !strings.Contains(got, "objective:map[id:"+ar.run) {
				t.Errorf("n%d lists agent %s's feedback without its objective: %s", j, ar.agent, got)
			}
			if j == 0 {
				first = got
			} else if got != first {
				t.Errorf("n%d lists agent %s's feedback as %s, n0 as %s", j, ar.agent, got, first)
			}
		}
	}
	// NATS: a connection that authenticated with its key alone (no
	// Authorization header) is served whichever node's service its
	// requests reach through the queue group.
	if mode == embeddedNATS {
		for j, s := range nodes {
			nc, err := nats.Connect(s.NATSURL(), nats.Token(adminKey))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 12 {
				rep, err := nc.Request("plaudit.v1.default."+made[i%3].agent+".select", []byte(`{}`), 20*time.Second)
				if err != nil || rep.Header.Get("Nats-Service-Error-Code") != "" {
					t.Errorf("select %d over n%d's NATS with the connection's key: %v %v %s", i, j, err, rep.Header, rep.Data)
					break
				}
			}
			nc.Close()
		}
	}
	// Judged rewards (seed 003) whose episodes live on other nodes: the
	// judge.* signals reach each episode's agent, and a calibration reads
	// the reviews of episodes on every node.
	c[0].must(201, "POST", "/v1/tasks", `{"id": "acme/checks", "rubric": {"criteria": [
		{"id": "refund", "must": true, "check": {"type": "contains", "value": "refund"}}]}}`)
	for i, ar := range made {
		rw := c[(i+1)%3].must(201, "POST", "/v1/rewards",
			fmt.Sprintf(`{"task": {"id": "acme/checks"}, "answer": "A refund, %d.", "episode_id": %q}`, i, ar.run))
		if rw["status"] != "scored" {
			t.Fatalf("reward of episode %s: %v", ar.run, rw)
		}
		c[(i+2)%3].must(201, "POST", "/v1/jobs/"+ar.run+"/rewards", `{"kind": "review", "value": 1}`)
		judged := 0
		for _, it := range list(t, c[(i+2)%3].must(200, "GET", "/api/v1/agents/"+ar.agent+"/runs/"+ar.run+"/signals", ""), "items") {
			if strings.HasPrefix(it.(map[string]any)["kind"].(string), "judge.") {
				judged++
			}
		}
		if judged != 4 {
			t.Errorf("episode %s (agent made on n%d, reward on n%d): %d judge signals, want 4", ar.run, i, (i+1)%3, judged)
		}
	}
	for j := range nodes {
		items := list(t, c[j].must(200, "GET", "/v1/tasks/acme%2Fchecks/calibration", ""), "items")
		if len(items) != 1 || items[0].(map[string]any)["pairs"] != 3.0 {
			t.Errorf("calibration on n%d: %v, want one group of 3 pairs (an episode on each node)", j, items)
		}
	}
	// One external id sent to every node at once: one agent gets it. (A
	// node that loses the race in JetStream answers 503, whose retry is
	// then refused as taken.)
	for i := range 5 {
		body := fmt.Sprintf(`{"name": "customer", "external_id": "customer-%d"}`, i)
		statuses := make([]int, len(nodes))
		var wg sync.WaitGroup
		for j := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for try := 0; try < 100; try++ {
					r, err := c[j].rawSend("POST", "/api/v1/agents", body, nil)
					if err != nil || r.status != 503 {
						statuses[j] = r.status
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		slices.Sort(statuses)
		if want := []int{201, 409, 409}; !slices.Equal(statuses, want) {
			t.Errorf("external id customer-%d sent to every node at once: %v, want %v", i, statuses, want)
		}
	}
	// One Idempotency-Key on a request that names no agent (making an API
	// key), sent to every node at once: one node decides it, so one key is
	// made, and every answer is that key's or "in progress".
	for i := range 3 {
		name := fmt.Sprintf("idem-%d", i)
		hdr := map[string]string{"Idempotency-Key": "make-" + name}
		answers := make([]response, len(nodes))
		var wg sync.WaitGroup
		for j := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[j], _ = c[j].rawSend("POST", "/v1/workspaces/default/api-keys", fmt.Sprintf(`{"name": %q}`, name), hdr)
			}()
		}
		wg.Wait()
		made := map[string]bool{}
		for j, r := range answers {
			switch r.status {
			case 201:
				made[str(t, r.json(t), "id")] = true
			case 409: // the key's request in progress on the node deciding it
			default:
				t.Errorf("%s sent to n%d: %d %s", name, j, r.status, r.body)
			}
		}
		listed := 0
		for _, k := range list(t, c[0].must(200, "GET", "/v1/workspaces/default/api-keys", ""), "items") {
			if k.(map[string]any)["name"] == name {
				listed++
			}
		}
		if len(made) != 1 || listed != 1 {
			t.Errorf("%s sent to every node with one Idempotency-Key: answers name keys %v, %d listed; want one", name, made, listed)
		}
	}
	// A key made on one node authenticates on the others.
	key := str(t, c[0].must(201, "POST", "/v1/workspaces/default/api-keys", `{"name": "ci"}`), "key")
	for j := range nodes {
		c[j].as(key).must(200, "GET", "/api/v1/agents/"+made[0].agent, "")
	}
	// A key used through one node shows its last use on every node once
	// that node has saved it (once a minute; here at once).
	one := c[0].must(201, "POST", "/v1/workspaces/default/api-keys", `{"name": "one-node"}`)
	c[0].as(str(t, one, "key")).must(200, "GET", "/api/v1/agents/"+made[0].agent, "")
	if err := nodes[0].tenancy.SaveUsage(); err != nil {
		t.Fatal(err)
	}
	for j := range nodes {
		lastUsed := func() any {
			for _, k := range list(t, c[j].must(200, "GET", "/v1/workspaces/default/api-keys", ""), "items") {
				if k := k.(map[string]any); k["id"] == one["id"] {
					return k["last_used_at"]
				}
			}
			return nil
		}
		deadline := time.Now().Add(10 * time.Second)
		for lastUsed() == nil {
			if time.Now().After(deadline) {
				t.Fatalf("n%d shows no last use of a key used through n0 and saved there", j)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Every node shows the same cluster to an admin, and nothing to others.
	for j := range nodes {
		st := c[j].must(200, "GET", "/v1/cluster", "")
		if st["node"] != fmt.Sprintf("n%d", j) || st["name"] != "test" || st["partitions"] != 8.0 {
			t.Errorf("n%d's /v1/cluster: %v", j, st)
		}
		owned := 0.0
		for _, n := range list(t, st, "nodes") {
			owned += n.(map[string]any)["partitions"].(float64)
		}
		if len(list(t, st, "nodes")) != 3 || owned != 8 {
			t.Errorf("n%d sees nodes %v, owning %v partitions; want 3 nodes owning all 8", j, st["nodes"], owned)
		}
		// Each partition's log: three copies, the writes made above in them.
		logs, messages := list(t, st, "logs"), 0.0
		for _, l := range logs {
			lm := l.(map[string]any)
			messages += lm["messages"].(float64)
			if lm["leader"] == nil || len(lm["replicas"].([]any)) != 2 {
				t.Errorf("n%d: partition %v's log: %v, want a leader and two other copies", j, lm["partition"], lm)
			}
		}
		if len(logs) != 8 || messages == 0 {
			t.Errorf("n%d shows %d partition logs holding %v messages, want 8 holding the writes", j, len(logs), messages)
		}
		// The directory's and the leases' streams: three copies each, the
		// keys and the leases written above in them.
		for _, name := range []string{"directory", "leases"} {
			sm, _ := st[name].(map[string]any)
			if sm == nil || sm["leader"] == nil || len(sm["replicas"].([]any)) != 2 || sm["messages"].(float64) == 0 {
				t.Errorf("n%d: the %s's stream: %v, want a leader, two other copies and the writes", j, name, st[name])
			}
		}
		c[j].as(key).must(403, "GET", "/v1/cluster", "")
	}
	// Each node's metrics show the partitions it owns, together all of them.
	owned, logged := 0, 0
	for _, s := range nodes {
		resp, err := http.Get("http://" + s.HTTPAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "plaudit_cluster_partition_owned{") && strings.HasSuffix(line, " 1") {
				owned++
			}
			if strings.HasPrefix(line, "plaudit_cluster_partition_log_messages{") {
				logged++
			}
		}
		if !strings.Contains(string(body), "plaudit_cluster_nodes 3") {
			t.Errorf("%s's metrics do not count 3 nodes", s.HTTPAddr())
		}
	}
	if owned != 8 || logged != 8 {
		t.Errorf("the nodes' metrics show %d owned partitions and %d partition logs, want 8 of each", owned, logged)
	}
}

// The lease bucket's reads go to its stream's leader, on every node: a
// direct get may go to a paused server's copy, which never answers, and
// while a node was paused the others' lease rounds stalled on such reads.
func TestTheLeaseBucketIsReadFromItsLeader(t *testing.T) {
	nodes := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, s := range nodes {
		stream, err := s.cluster.js.Stream(ctx, "KV_"+cluster.LeaseBucket)
		if err != nil {
			t.Fatal(err)
		}
		if stream.CachedInfo().Config.AllowDirect {
			t.Errorf("node n%d: the lease bucket's stream allows direct gets", i)
		}
	}
}

func TestASingleServerHasNoCluster(t *testing.T) {
	s := startServer(t, Config{})
	newClient(t, s, adminKey).must(404, "GET", "/v1/cluster", "")
}

func TestANodeThatStopsHandsItsAgentsToTheOthers(t *testing.T) {
	nodes := startCluster(t, 3)
	c0 := newClient(t, nodes[0], adminKey)
	c2 := newClient(t, nodes[2], adminKey)
	// Agents made on node 1 live in its partitions.
	c1 := newClient(t, nodes[1], adminKey)
	var agents, runs []string
	for i := range 4 {
		agent := str(t, c1.must(201, "POST", "/api/v1/agents", fmt.Sprintf(`{"name": "a%d"}`, i)), "id")
		run := str(t, c1.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{"version": "1"}`), "id")
		c1.must(201, "POST", "/api/v1/agents/"+agent+"/signals",
			fmt.Sprintf(`{"kind": "human.rating", "value": 5, "run_id": %q, "dedup_key": "before"}`, run))
		agents, runs = append(agents, agent), append(runs, run)
	}
	// Before it hands its partitions over, a stopping node's server gives
	// up leading streams (stepDown, the first thing Close does in a
	// cluster), so the new owners and the others' watches do not go
	// through a server about to stop.
	nodes[1].cluster.stepDown()
	streams := nodes[0].cluster.js.ListStreams(context.Background())
	listed := 0
	for info := range streams.Info() {
		listed++
		if info.Cluster != nil && info.Cluster.Leader == "n1" {
			t.Errorf("stream %s still led by n1 after its step-down", info.Config.Name)
		}
	}
	if err := streams.Err(); err != nil || listed == 0 {
		t.Fatalf("listing the streams: %d, %v", listed, err)
	}
	if err := nodes[1].Close(); err != nil {
		t.Fatal(err)
	}
	for i, agent := range agents {
		c0.must(201, "POST", "/api/v1/agents/"+agent+"/signals",
			fmt.Sprintf(`{"kind": "human.rating", "value": 3, "run_id": %q, "dedup_key": "after"}`, runs[i]))
		items := list(t, c2.must(200, "GET", "/api/v1/agents/"+agent+"/runs/"+runs[i]+"/signals", ""), "items")
		if len(items) != 2 {
			t.Fatalf("agent %s after its node stopped: %d signals, want the one before and the one after", agent, len(items))
		}
	}
}

// A task's judged rewards are made and judged by the node serving the
// task, whichever node they are sent to, each judge asked once; when that
// node stops, the next one resumes its pending rewards.
func TestJudgedRewardsAreJudgedByTheNodeServingTheirTask(t *testing.T) {
	nodes := startCluster(t, 3)
	c := make([]*client, len(nodes))
	for i, s := range nodes {
		c[i] = newClient(t, s, adminKey)
	}
	c[0].must(201, "POST", "/v1/tasks", toneTask)
	owner := func() int {
		p := cluster.PartitionOf(taskPlacementKey("default", "acme/tone"), 8)
		for i, s := range nodes {
			if _, ok := s.cluster.leases.Owns(p); ok {
				return i
			}
		}
		return -1
	}
	first := owner()
	if first < 0 {
		t.Fatal("no node serves the task")
	}
	// The judge worker is connected to a node that will stay up; it
	// answers once answering is switched on.
	var answering atomic.Bool
	answering.Store(true)
	w := startJudge(t, nodes[(first+1)%3], "tone", 100*time.Millisecond, func(int32) string {
		if answering.Load() {
			return `{"met": true}`
		}
		return `{"met": "not yet"}` // malformed: asked again after a backoff
	})
	wait := map[string]string{"Prefer": "wait=10"}
	for i := range nodes {
		body := fmt.Sprintf(`{"task": {"id": "acme/tone"}, "answer": "We will refund you, %d."}`, i)
		r := c[i].request("POST", "/v1/rewards", body, wait)
		if r.status != 201 || str(t, r.json(t), "status") != "scored" {
			t.Fatalf("reward sent to n%d: %d %s", i, r.status, r.body)
		}
		for j := range nodes {
			g := c[j].must(200, "GET", "/v1/rewards/"+str(t, r.json(t), "id"), "")
			if g["status"] != "scored" {
				t.Errorf("reward sent to n%d, read on n%d: %v", i, j, g)
			}
		}
	}
	if n := w.asked.Load(); n != 3 {
		t.Errorf("the judge was asked %d times for 3 rewards, want 3", n)
	}
	// The same answer sent to every node at once is one reward: the node
	// serving the task decides which is first.
	ids := make([]string, len(nodes))
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c[i].rawSend("POST", "/v1/rewards", `{"task": {"id": "acme/tone"}, "answer": "Refunded."}`, wait)
			if err == nil && (r.status == 200 || r.status == 201) {
				var m struct{ ID string }
				_ = json.Unmarshal(r.body, &m)
				ids[i] = m.ID
			}
		}()
	}
	wg.Wait()
	if ids[0] == "" || ids[0] != ids[1] || ids[1] != ids[2] {
		t.Errorf("one answer sent to every node at once: rewards %v, want one", ids)
	}
	if n := w.asked.Load(); n != 4 {
		t.Errorf("the judge was asked %d times for 4 rewards, want 4", n)
	}

	// A pending reward whose node stops: the next node serving the task
	// resumes it, and it is scored.
	answering.Store(false)
	r := c[first].request("POST", "/v1/rewards", `{"task": {"id": "acme/tone"}, "answer": "Sorry."}`, nil)
	if r.status != 202 {
		t.Fatalf("pending reward: %d %s", r.status, r.body)
	}
	id := str(t, r.json(t), "id")
	if err := nodes[first].Close(); err != nil {
		t.Fatal(err)
	}
	answering.Store(true)
	other := (first + 1) % 3
	g := c[other].request("GET", "/v1/rewards/"+id, "", map[string]string{"Prefer": "wait=30"})
	if g.status != 200 || str(t, g.json(t), "status") != "scored" {
		t.Fatalf("the pending reward after its node stopped: %d %s", g.status, g.body)
	}
}

// A keyed write whose batch the log took but whose Idempotency-Key record
// was never confirmed in the directory (here the directory stream is full
// once the record's claim is in; a node crashing between the two is the
// same) is answered 503, and its retry replays the first answer instead of
// writing again: loading the agent restores the index of its last logged
// batch, and a keyed write loads its agent before it looks its key up.
func TestAKeyedWriteWhoseRecordMissedTheDirectoryIsNotWrittenTwice(t *testing.T) {
	node := startCluster(t, 3)[0]
	c := newClient(t, node, adminKey)
	agent := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "keyed"}`), "id")
	run := str(t, c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{"version": "1"}`), "id")
	signal := fmt.Sprintf(`{"kind": "human.rating", "value": 4, "run_id": %q}`, run)
	keyed := map[string]string{"Idempotency-Key": "rating-1"}
	// A run is answered before its write is durable (its index with it): a
	// read waits for that, so the directory below holds it.
	c.must(200, "GET", "/api/v1/agents/"+agent+"/runs/"+run, "")

	ctx := t.Context()
	dir, err := node.cluster.js.Stream(ctx, jslog.DirStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dir.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Room for one more directory write: the record's claim, made before
	// the log append; the rest of the index, after it, finds no room.
	full, open := info.Config, info.Config
	full.MaxMsgs, open.MaxMsgs = int64(info.State.Msgs)+1, -1
	if _, err := node.cluster.js.UpdateStream(ctx, full); err != nil {
		t.Fatal(err)
	}
	first, err := c.rawSend("POST", "/api/v1/agents/"+agent+"/signals", signal, keyed)
	if err != nil || first.status != 503 {
		t.Fatalf("the keyed signal with the directory full: %d %s %v, want 503", first.status, first.body, err)
	}
	if after, err := dir.Info(ctx); err != nil || after.State.Msgs != info.State.Msgs+1 {
		t.Fatalf("the directory holds %d writes more after the failed try (%v), want 1, its claim: the test did not make the failure it is about",
			after.State.Msgs-info.State.Msgs, err)
	}
	if _, err := node.cluster.js.UpdateStream(ctx, open); err != nil {
		t.Fatal(err)
	}
	again, err := c.rawSend("POST", "/api/v1/agents/"+agent+"/signals", signal, keyed)
	if err != nil || again.status != 201 {
		t.Fatalf("the retry: %d %s %v, want 201", again.status, again.body, err)
	}
	items := list(t, c.must(200, "GET", "/api/v1/agents/"+agent+"/runs/"+run+"/signals", ""), "items")
	if len(items) != 1 {
		t.Fatalf("the run holds %d signals after a keyed signal and its retry, want 1: %v", len(items), items)
	}
	if id := str(t, again.json(t), "id"); id != items[0].(map[string]any)["id"] {
		t.Errorf("the retry answered signal %s, the run holds %v", id, items[0])
	}
}

// A lease bucket made by an earlier version kept entries one lease TTL; a
// node starting gives it the TTL of today's (LeaseBucketConfig).
func TestALeaseBucketOfOneTTLIsGivenTodaysTTL(t *testing.T) {
	js, err := jetstream.New(jstest.Server(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old := cluster.LeaseBucketConfig(1, 3*time.Second)
	old.TTL = 3 * time.Second
	if _, err := js.CreateKeyValue(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := leaseExpiry(ctx, js, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, cluster.LeaseStream)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.CachedInfo().Config.MaxAge, cluster.LeaseBucketConfig(1, 3*time.Second).TTL; got != want || want == old.TTL {
		t.Fatalf("the bucket keeps entries %v, want %v (not %v)", got, want, old.TTL)
	}
}

// A node answers its status while the directory's stream has no leader,
// when an operator needs it most: here two of three servers are gone, the
// directory's leader with them, so no copy can lead. Until the survivor's
// copy notices, JetStream does not answer for the stream at all; the
// status answered 500 after the directory's 10 s timeout then. It answers
// 200 throughout now, the directory's lag null when it cannot be read.
func TestTheClusterStatusAnswersWhileTheDirectoryHasNoLeader(t *testing.T) {
	c := startCluster(t, 3)
	// The survivor must not be the directory's leader: a leader answers
	// for its stream until it notices the lost quorum.
	var leader string
	for deadline := time.Now().Add(30 * time.Second); leader == ""; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the directory had no leader in 30s")
		}
		dir, _ := newClient(t, c[0], adminKey).must(200, "GET", "/v1/cluster", "")["directory"].(map[string]any)
		leader, _ = dir["leader"].(string)
	}
	survivor := slices.IndexFunc(c, func(s *Server) bool { return s.cluster.cfg.Node != leader })
	for i, s := range c {
		if i != survivor {
			s.nats.Shutdown()
		}
	}
	cl := newClient(t, c[survivor], adminKey)
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := cl.must(200, "GET", "/v1/cluster", "")
		if len(list(t, st, "owners")) != 8 {
			t.Errorf("/v1/cluster without the directory: %v", st)
		}
		if dir, _ := st["directory"].(map[string]any); dir["leader"] == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the directory still led after 60s: %v", st["directory"])
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestAPartitionFencedUnderItsOwnerIsTakenAfresh: a message its owner did
// not write, found in a partition's log where the owner's next write was to
// go, fences the owner's Log for good, though the owner still holds the
// lease. The owner then gives the partition up, and it is taken again
// with a fresh fence: the agent's writes are answered again, under a new
// epoch, and none acknowledged before is lost.
func TestAPartitionFencedUnderItsOwnerIsTakenAfresh(t *testing.T) {
	nodes := startCluster(t, 3)
	c := newClient(t, nodes[0], adminKey)
	agent := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "fenced"}`), "id")
	run := str(t, c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{"version": "1"}`), "id")
	signal := func(i int) int {
		return c.request("POST", "/api/v1/agents/"+agent+"/signals",
			fmt.Sprintf(`{"kind": "load.test", "value": 1, "run_id": %q, "dedup_key": "s%d"}`, run, i), nil).status
	}
	if status := signal(0); status != 201 {
		t.Fatalf("signal 0: status %d", status)
	}
	p := nodes[0].cluster.partition(agent)
	owner := slices.IndexFunc(nodes, func(s *Server) bool { _, ok := s.cluster.leases.Owns(p); return ok })
	if owner < 0 {
		t.Fatalf("partition %d not owned after a write to it", p)
	}
	s := nodes[owner]
	before, _ := s.cluster.leases.Owns(p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.cluster.js.Publish(ctx, fmt.Sprintf("plaudit.log.%d._fence", p), binary.BigEndian.AppendUint64(nil, 1)); err != nil {
		t.Fatal(err)
	}
	acked, refused := 1, 0
	for i := 1; ; i++ {
		switch status := signal(i); status {
		case 201:
			acked++
		case 503:
			refused++
		default:
			t.Fatalf("signal %d: status %d", i, status)
		}
		if refused > 0 && acked > 1 && slices.ContainsFunc(nodes, func(s *Server) bool {
			after, ok := s.cluster.leases.Owns(p)
			return ok && after != before
		}) {
			t.Logf("partition %d taken again after %d refused writes", p, refused)
			break
		}
		if i > 300 {
			t.Fatalf("the partition's writes are still refused after %d tries (%d refused, %d acknowledged)", i, refused, acked)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(list(t, c.must(200, "GET", "/api/v1/agents/"+agent+"/runs/"+run+"/signals", ""), "items")); n != acked {
		t.Fatalf("%d signals read, %d acknowledged", n, acked)
	}
}

// TestRacingExternalIDsAcknowledgeOnlyDurableRuns: agents served by three
// nodes create runs claiming one external id at once, beside runs that
// claim none. The claims meet only in the replicated directory, when the
// batches are appended, so a node cannot know beforehand that its claim
// will lose: every run acknowledged must be one the log kept (a run was
// answered 201 before its append, then lost with its batch, and the runs
// batched with it), and the id names one run.
func TestRacingExternalIDsAcknowledgeOnlyDurableRuns(t *testing.T) {
	nodes := startCluster(t, 3)
	c := make([]*client, len(nodes))
	for i, s := range nodes {
		c[i] = newClient(t, s, adminKey)
	}
	// One agent served by each node: a node makes an agent on a partition
	// it owns.
	agents := make([]string, len(nodes))
	for i := range nodes {
		agents[i] = str(t, c[i].must(201, "POST", "/api/v1/agents", `{"name": "racer"}`), "id")
		if owner := nodes[0].cluster.owner(agents[i]); owner != fmt.Sprintf("n%d", i) {
			t.Fatalf("agent %s made on n%d is served by %s", agents[i], i, owner)
		}
	}
	type acked struct{ agent, run string }
	var (
		mu   sync.Mutex
		runs []acked
		byID = map[string][]string{}
	)
	for try := range 6 {
		ext := fmt.Sprintf("race-%d", try)
		var wg sync.WaitGroup
		for i, agent := range agents {
			for k := range 4 {
				body := `{"version": "plain"}`
				if k == 0 {
					body = `{"external_id": "` + ext + `"}`
				}
				wg.Go(func() {
					r, err := c[i].rawSend("POST", "/api/v1/agents/"+agent+"/runs", body, nil)
					if err != nil || r.status != 201 {
						return // refused (409, or 503 for a batch whose claim lost): not acknowledged
					}
					var m struct{ ID string }
					if json.Unmarshal(r.body, &m) != nil {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					runs = append(runs, acked{agent, m.ID})
					if k == 0 {
						byID[ext] = append(byID[ext], m.ID)
					}
				})
			}
		}
		wg.Wait()
	}
	for ext, ids := range byID {
		if len(ids) > 1 {
			t.Errorf("external id %s acknowledged for %d runs: %v", ext, len(ids), ids)
		}
	}
	for _, r := range runs {
		for j := range nodes {
			if got := c[j].request("GET", "/api/v1/agents/"+r.agent+"/runs/"+r.run, "", nil); got.status != 200 {
				t.Errorf("run %s of agent %s, acknowledged 201: n%d answers %d %s", r.run, r.agent, j, got.status, got.body)
			}
		}
	}
	t.Logf("%d runs acknowledged", len(runs))
}
