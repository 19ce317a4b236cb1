package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// natsSignal sends one signal over NATS and returns the signal's id and
// whether it was a duplicate; ok is false unless the reply acknowledged it.
func natsSignal(nc *nats.Conn, subject, body string) (id string, dup, ok bool) {
	msg := nats.NewMsg(subject)
	msg.Data = []byte(body)
	msg.Header.Set("Authorization", "Bearer "+killTestKey)
	rep, err := nc.RequestMsg(msg, 10*time.Second)
	if err != nil || rep.Header.Get(micro.ErrorCodeHeader) != "" {
		return "", false, false
	}
	var m struct {
		ID        string
		Duplicate bool
	}
	if json.Unmarshal(rep.Data, &m) != nil || m.ID == "" {
		return "", false, false
	}
	return m.ID, m.Duplicate, true
}

// TestKill9OverNATSLosesNoAcknowledgedSignal: the kill -9 test over the
// NATS door. 32 writers on 4 connections send signals with unique dedup
// keys while the server is SIGKILLed; after a restart every signal whose
// reply acknowledged it is on its run, and its dedup key answers it again
// as a duplicate.
func TestKill9OverNATSLosesNoAcknowledgedSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it; skipped with -short")
	}
	bin := buildPlaudit(t)
	data := t.TempDir()
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()

	srv := startPlaudit(t, bin, data, "first")
	api := &kclient{t: t, hc: hc, base: srv.base}
	agent := api.id(api.must(201, "POST", "/api/v1/agents", `{"name": "kill-9-nats"}`))
	var runs []string
	for range 4 {
		runs = append(runs, api.id(api.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{}`)))
	}
	subject := "plaudit.v1.default." + agent + ".signal"
	conns := make([]*nats.Conn, 4)
	for i := range conns {
		nc, err := nats.Connect(srv.nats, nats.Token(killTestKey), nats.MaxReconnects(0))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		conns[i] = nc
	}

	type ack struct{ run, body, id string }
	var (
		mu    sync.Mutex
		acked []ack
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	for g := range 32 {
		wg.Go(func() {
			nc := conns[g%len(conns)]
			for i := 0; !stop.Load(); i++ {
				run := runs[(g+i)%len(runs)]
				body := fmt.Sprintf(`{"kind": "load.test", "value": %d, "run_id": %q, "dedup_key": "n%02d-%06d"}`, i, run, g, i)
				id, _, ok := natsSignal(nc, subject, body)
				if !ok {
					if nc.IsClosed() {
						return
					}
					time.Sleep(time.Millisecond)
					continue
				}
				mu.Lock()
				acked = append(acked, ack{run: run, body: body, id: id})
				mu.Unlock()
			}
		})
	}
	srv.killUnderLoad(t, &stop, &wg)
	if len(acked) == 0 {
		t.Fatal("no signal was acknowledged before the kill")
	}
	t.Logf("%d signals acknowledged over NATS before SIGKILL", len(acked))

	srv = startPlaudit(t, bin, data, "second")
	api = &kclient{t: t, hc: hc, base: srv.base}
	stored := map[string]bool{}
	for _, r := range runs {
		var list struct{ Items []struct{ ID string } }
		if err := json.Unmarshal(api.mustRaw(200, "GET", "/api/v1/agents/"+agent+"/runs/"+r+"/signals", ""), &list); err != nil {
			t.Fatalf("signals of %s: %v", r, err)
		}
		for _, it := range list.Items {
			stored[it.ID] = true
		}
	}
	lost := 0
	for _, a := range acked {
		if !stored[a.id] {
			if lost++; lost <= 5 {
				t.Errorf("acknowledged signal %s (%s) is missing after restart", a.id, a.body)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged signals lost", lost, len(acked))
	}

	nc, err := nats.Connect(srv.nats, nats.Token(killTestKey))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var notDup atomic.Int64
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < len(acked); i += 16 {
				a := acked[i]
				id, dup, ok := natsSignal(nc, subject, a.body)
				if (!ok || !dup || id != a.id) && notDup.Add(1) <= 5 {
					t.Errorf("re-send of %s: id %q duplicate %v ok %v; want a duplicate of %s", a.body, id, dup, ok, a.id)
				}
			}
		})
	}
	wg.Wait()
	if n := notDup.Load(); n > 0 {
		t.Errorf("%d of %d acknowledged dedup keys were not answered as duplicates", n, len(acked))
	}
}
