package bench

import (
	"fmt"
	"io"
	"time"
)

// Recovery is what one recovery scenario measured: a server that logged
// Events signal events over Agents agents, stopped (SIGTERM) and started
// again on the same data.
type Recovery struct {
	Name      string `json:"name"`
	Events    int    `json:"events"`
	Agents    int    `json:"agents"`
	Snapshots bool   `json:"snapshots"`
	// Healthz is from the restarted process's start to its first
	// /healthz 200: opening the store (Pebble's own WAL replay) and the
	// tenancy. Agents recover lazily, on their first request, so
	// AllAgents, from the same start to the moment the last of the
	// Agents answered its first read (64 in flight), is the time to full
	// service.
	Healthz   time.Duration `json:"healthz_ns"`
	AllAgents time.Duration `json:"all_agents_ns"`
	// RSS is the restarted server's resident set once every agent has
	// recovered.
	RSS int64 `json:"rss"`
	// RSSEmpty is the same binary's resident set on its first start, on
	// the empty directory: what the process costs before it stores
	// anything (its mapped text, the runtime, the embedded NATS server).
	RSSEmpty int64 `json:"rss_empty"`
}

// PerEvent is the resident set the events added, per event.
func (r Recovery) PerEvent() float64 { return float64(r.RSS-r.RSSEmpty) / float64(r.Events) }

// noSnapshots are the serve flags under which no agent snapshots during
// the run, so that recovery replays every event.
var noSnapshots = []string{"--snapshot-every", "2000000000", "--snapshot-interval", "876000h", "--idle-timeout", "876000h"}

// RunRecovery starts a server over a fresh directory in dir (with the
// default snapshot policy, or none), logs events signals over
// memoryAgents agents through it, stops it, restarts it and times the
// recovery.
func RunRecovery(cfg ServerConfig, events int, snapshots bool, progress io.Writer) (Recovery, error) {
	r := Recovery{Name: "recovery-no-snapshots", Events: events, Agents: memoryAgents, Snapshots: snapshots}
	if snapshots {
		r.Name = "recovery-snapshots"
	} else {
		cfg.Args = append(append([]string(nil), cfg.Args...), noSnapshots...)
	}
	s, err := StartServerProcess(cfg)
	if err != nil {
		return r, err
	}
	r.RSSEmpty, err = procRSS(s.PID)
	var targets []target
	var cl *client
	if err == nil {
		targets, cl, err = newTargets(s.Target, memoryAgents)
	}
	if err == nil {
		err = postSignals(cl, targets, events, progress, "recovery/"+r.Name+" (logging)")
		cl.hc.CloseIdleConnections()
	}
	if serr := s.Stop(); err == nil {
		err = serr
	}
	if err != nil {
		return r, err
	}
	cfg.Key = s.Target.Key
	s, err = StartServerProcess(cfg)
	if err != nil {
		return r, err
	}
	defer s.Stop()
	r.Healthz = s.Healthy
	cl, err = newClient(s.Target.HTTP, s.Target.Key, 64)
	if err != nil {
		return r, err
	}
	defer cl.hc.CloseIdleConnections()
	next := make(chan target, len(targets))
	for _, t := range targets {
		next <- t
	}
	close(next)
	err = setup(64, len(targets), func(int) (Op, error) {
		return func() error {
			t := <-next
			_, err := cl.send("GET", "/api/v1/agents/"+t.agent+"/runs/"+t.run, nil, 200)
			return err
		}, nil
	})
	if err != nil {
		return r, fmt.Errorf("bench: first reads after restart: %w", err)
	}
	r.AllAgents = time.Since(s.Started)
	r.RSS, err = procRSS(s.PID)
	return r, err
}
