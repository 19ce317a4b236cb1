package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Target is the Plaudit server under test: a child process the harness
// started (Server set) or one already running (Server nil, given by URL).
type Target struct {
	HTTP  string // base URL, http://host:port
	NATS  string // nats://host:port
	Key   string // an admin key
	Pprof string // host:port of its net/http/pprof, "" if none
	// Server is the child process; nil for a running server.
	Server *ServerProcess
}

// CPU reads the server process's CPU clock; nil when the server is not a
// child (its CPU is not this harness's to read).
func (t Target) CPU() func() time.Duration {
	if t.Server == nil {
		return nil
	}
	return t.Server.CPU
}

// ServerProcess is `plaudit serve` in a process of its own.
type ServerProcess struct {
	*Process
	Target  Target
	Data    string
	Started time.Time     // when the process was started
	Healthy time.Duration // from start to the first /healthz 200
}

// ServerConfig says how to start a child server.
type ServerConfig struct {
	Bin  string   // the plaudit binary (os.Executable() for `plaudit bench`)
	Data string   // its data directory; may hold an earlier run's data
	Key  string   // the bootstrap admin key ("" makes one)
	Args []string // more `serve` flags
	// LogDir receives the server's log (serve-<n>.log).
	LogDir string
}

// StartServerProcess starts `Bin serve` on free loopback ports for HTTP,
// NATS and pprof, with Key as PLAUDIT_BOOTSTRAP_KEY, and waits until
// /healthz answers 200 (recovery included: on a data directory with a
// large log that is the recovery time, reported as Healthy).
func StartServerProcess(cfg ServerConfig) (*ServerProcess, error) {
	if cfg.Key == "" {
		cfg.Key = newKey()
	}
	return startOnFreePorts(3, func(addrs []string) (*ServerProcess, error) { return startServerOn(cfg, addrs) })
}

// startServerOn is StartServerProcess on the given HTTP, NATS and pprof
// addresses.
func startServerOn(cfg ServerConfig, addrs []string) (*ServerProcess, error) {
	args := append([]string{"serve", "--data", cfg.Data, "--http", addrs[0], "--nats-listen", addrs[1],
		"--pprof", addrs[2], "--log-level", "warn"}, cfg.Args...)
	logPath, err := nextLog(cfg.LogDir, "serve")
	if err != nil {
		return nil, err
	}
	started := time.Now()
	p, err := startProcess(cfg.Bin, args, []string{"PLAUDIT_BOOTSTRAP_KEY=" + cfg.Key}, logPath)
	if err != nil {
		return nil, err
	}
	s := &ServerProcess{Process: p, Data: cfg.Data, Started: started}
	s.Target = Target{HTTP: "http://" + addrs[0], NATS: "nats://" + addrs[1], Key: cfg.Key, Pprof: addrs[2], Server: s}
	if err := p.waitHealthy(s.Target.HTTP+"/healthz", 10*time.Minute); err != nil {
		_ = p.Stop()
		return nil, err
	}
	s.Healthy = time.Since(started)
	return s, nil
}

// nextLog is a fresh log path name-<n>.log in dir.
func nextLog(dir, name string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	for n := 1; ; n++ {
		p := filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, n))
		if _, err := os.Stat(p); os.IsNotExist(err) {
			return p, nil
		}
	}
}

// HelloProcess is `plaudit bench-hello`: the HTTP and NATS floors in a
// process of their own (see ServeHello).
type HelloProcess struct {
	*Process
	HTTP string // base URL of the fixed-body handler
	NATS string // URL of the echo's NATS server
	Key  string // the token the echo's NATS server accepts
}

// StartHelloProcess starts `bin bench-hello` on free loopback ports, with
// its durable floor's Pebble in dataDir.
func StartHelloProcess(bin, logDir, dataDir string) (*HelloProcess, error) {
	return startOnFreePorts(2, func(addrs []string) (*HelloProcess, error) {
		return startHelloOn(bin, logDir, dataDir, addrs[0], addrs[1])
	})
}

func startHelloOn(bin, logDir, dataDir, httpAddr, natsAddr string) (*HelloProcess, error) {
	logPath, err := nextLog(logDir, "hello")
	if err != nil {
		return nil, err
	}
	key := newKey()
	p, err := startProcess(bin, []string{"bench-hello", "--http", httpAddr, "--nats", natsAddr, "--data", dataDir},
		[]string{"PLAUDIT_BOOTSTRAP_KEY=" + key}, logPath)
	if err != nil {
		return nil, err
	}
	h := &HelloProcess{Process: p, HTTP: "http://" + httpAddr, NATS: "nats://" + natsAddr, Key: key}
	if err := p.waitHealthy(h.HTTP+"/", time.Minute); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return h, nil
}

// pprofGet fetches path from the server's pprof listener into w.
func pprofGet(addr, path string, w io.Writer) error {
	hc := &http.Client{Timeout: 10 * time.Minute}
	resp, err := hc.Get("http://" + addr + path)
	if err != nil {
		return fmt.Errorf("bench: pprof: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("bench: pprof %s: HTTP %d: %s", path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	_, err = io.Copy(w, resp.Body)
	return err
}
