package bench

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// suite is one run of the harness: the child processes it started and
// what it measured so far.
type suite struct {
	opts Options
	root string // fresh directory for data and logs
	logs string
	rep  *Report

	target   Target         // the server under test of the current family
	server   *ServerProcess // the child behind target; nil for a running server
	agent    string         // the select agent on target, once made
	hello    *HelloProcess
	redis    *RedisProcess
	redisAOF *RedisProcess
	results  map[rowKey]Result

	logMu sync.Mutex // logf's lines, one at a time (a set-up note comes from a timer)
}

type rowKey struct {
	name string
	c    int
}

// dir is a directory under the suite's root.
func (s *suite) dir(name string) string { return filepath.Join(s.root, name) }

func (s *suite) logf(format string, args ...any) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.opts.Progress, format+"\n", args...)
}

// wanted is the set of rows to run: those Only matches, and the rows they
// are divided by.
func (s *suite) wanted() map[string]bool {
	w := map[string]bool{}
	for _, f := range families {
		for _, r := range f.rows {
			if s.opts.Only == nil || s.opts.Only.MatchString(f.name+"/"+r.name) {
				w[r.name] = true
				if r.base != "" {
					w[r.base] = true
				}
				if r.vs != "" {
					w[r.vs] = true
				}
			}
		}
	}
	return w
}

func (s *suite) run() error {
	s.results = map[rowKey]Result{}
	wanted := s.wanted()
	if s.opts.RedisServer == "" {
		s.rep.Skipped = append(s.rep.Skipped, RedisInstall)
		s.logf("%s", RedisInstall)
	}
	for _, f := range families {
		var rows []scenario
		for _, r := range f.rows {
			if wanted[r.name] && s.available(r) {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		if err := s.runFamily(f.name, rows); err != nil {
			return err
		}
	}
	if s.opts.Target != nil {
		s.rep.Notes = append(s.rep.Notes, "the baselines (fixed body, echo, raw Pebble, Redis) ran on this machine: "+
			"against a server on another machine, a ratio to them compares two machines",
			"the rows' agents, runs and signals stay on the server measured")
		if s.opts.Only == nil {
			s.rep.Skipped = append(s.rep.Skipped, "memory and recovery: they restart and inspect the server process, so they need a child server")
		}
		return nil
	}
	if s.selected("memory/per-signal") || s.selected("memory/per-idle-agent") {
		if err := s.runMemory(); err != nil {
			return err
		}
	}
	for _, snapshots := range []bool{false, true} {
		name := "recovery/recovery-no-snapshots"
		if snapshots {
			name = "recovery/recovery-snapshots"
		}
		if !s.selected(name) {
			continue
		}
		if interrupted.Load() {
			return ErrInterrupted
		}
		s.logf("%s: logging %d events, restarting", name, s.opts.RecoveryEvents)
		r, err := RunRecovery(ServerConfig{Bin: s.opts.Bin, Data: s.dir(filepath.Base(name)), LogDir: s.logs},
			s.opts.RecoveryEvents, snapshots, s.opts.Progress)
		if err != nil {
			return fmt.Errorf("bench: %s: %w", name, err)
		}
		s.logf("%s: /healthz after %v, every agent after %v", name, r.Healthz.Round(time.Millisecond), r.AllAgents.Round(time.Millisecond))
		s.rep.Recovery = append(s.rep.Recovery, r)
	}
	return nil
}

func (s *suite) selected(name string) bool {
	return s.opts.Only == nil || s.opts.Only.MatchString(name)
}

// available reports whether r can run here, noting why not when it cannot.
func (s *suite) available(r scenario) bool {
	switch {
	case (r.proc == procRedis || r.proc == procRedisAOF) && s.opts.RedisServer == "":
		return false
	case strings.HasPrefix(r.name, "nats-") && r.proc == procServer && s.opts.Target != nil && s.opts.Target.NATS == "":
		s.rep.Skipped = append(s.rep.Skipped, r.name+": no --nats URL")
		return false
	}
	return true
}

// runFamily measures rows at every concurrency on a fresh child server (or
// the running one).
func (s *suite) runFamily(name string, rows []scenario) (err error) {
	if err := s.startTarget(name); err != nil {
		return err
	}
	defer func() {
		if serr := s.stopTarget(name); err == nil {
			err = serr
		}
	}()
	for _, c := range s.opts.Concurrency {
		for _, r := range rows {
			if c < r.minC || (r.maxC > 0 && c > r.maxC) {
				continue
			}
			if err := s.measure(name, r, c); err != nil {
				return fmt.Errorf("bench: %s/%s c=%d: %w", name, r.name, c, err)
			}
		}
	}
	return nil
}

// startTarget starts a child server over a fresh directory for family
// name, unless a running server is the target.
func (s *suite) startTarget(name string) error {
	s.agent = ""
	if s.opts.Target != nil {
		s.target = *s.opts.Target
		return nil
	}
	srv, err := StartServerProcess(ServerConfig{Bin: s.opts.Bin, Data: s.dir("data-" + name), LogDir: s.logs})
	if err != nil {
		return err
	}
	s.server, s.target = srv, srv.Target
	return nil
}

// stopTarget writes the family's heap profile if asked, and stops the
// child server.
func (s *suite) stopTarget(name string) error {
	var err error
	if s.opts.MemProfile != "" && s.target.Pprof != "" {
		err = s.writeProfile(s.opts.MemProfile+"-"+name+"-heap.pprof", "/debug/pprof/heap?gc=1")
	}
	if s.server == nil {
		return err
	}
	if serr := s.server.Stop(); err == nil {
		err = serr
	}
	s.server = nil
	return err
}

// selectAgent is the current target's select agent, made on first use.
func (s *suite) selectAgent() (string, error) {
	if s.agent == "" {
		a, err := NewSelectAgent(s.target.HTTP, s.target.Key)
		if err != nil {
			return "", err
		}
		s.agent = a
	}
	return s.agent, nil
}

// ensure starts the child processes r needs.
func (s *suite) ensure(r scenario) error {
	var err error
	switch {
	case r.proc == procHello && s.hello == nil:
		s.hello, err = StartHelloProcess(s.opts.Bin, s.logs, mkdir(s.dir("hello-pebble")))
	case r.proc == procRedis && s.redis == nil:
		s.redis, err = StartRedis(s.opts.RedisServer, mkdir(s.dir("redis")), s.logs, false)
	case r.proc == procRedisAOF && s.redisAOF == nil:
		s.redisAOF, err = StartRedis(s.opts.RedisServer, mkdir(s.dir("redis-aof")), s.logs, true)
	}
	return err
}

func mkdir(d string) string {
	_ = os.MkdirAll(d, 0o755)
	return d
}

// cpuOf is the CPU clock of proc, or a zero clock where it is not ours to
// read (a running server).
func (s *suite) cpuOf(proc string) func() time.Duration {
	zero := func() time.Duration { return 0 }
	switch proc {
	case procServer:
		if s.server == nil {
			return zero
		}
		return s.server.CPU
	case procHello:
		return s.hello.CPU
	case procRedis:
		return s.redis.CPU
	case procRedisAOF:
		return s.redisAOF.CPU
	}
	return nil // this process
}

// measure runs r at c and adds its row to the report.
func (s *suite) measure(fam string, r scenario, c int) error {
	if interrupted.Load() {
		return ErrInterrupted
	}
	if err := s.ensure(r); err != nil {
		return err
	}
	label := fmt.Sprintf("%s/%s c=%d", fam, r.name, c)
	l := Loop{C: c, N: s.opts.Ops, D: s.opts.Duration, Rate: s.opts.Rate, CPU: s.cpuOf(r.proc), Warm: 1,
		Progress: s.opts.Progress, Label: label}
	if l.D > 0 {
		l.N = 0
	} else if r.opsDiv > 1 {
		l.N = max(1, l.N/r.opsDiv)
	}
	var profiles chan error
	profiling := false // the profiles were asked for: a row that failed in its set-up never starts them
	if r.proc == procServer && s.target.Pprof != "" && (s.opts.CPUProfile != "" || s.opts.MemProfile != "") {
		profiles = make(chan error, 2)
		l.Started = func() { profiling = true; s.startProfiles(fam, r.name, c, l.D, profiles) }
	}
	rounds := max(1, s.opts.Rounds)
	if profiles != nil {
		rounds = 1 // one profile per row
	}
	// A set-up that takes a while (a summary's 10,000 runs) says so, rather
	// than leaving the progress silent until the row's clock starts.
	setupNote := time.AfterFunc(time.Second, func() { s.logf("%s: setting up", label) })
	started := l.Started
	l.Started = func() {
		setupNote.Stop()
		if started != nil {
			started()
		}
	}
	var all []Result
	var err error
	for range rounds {
		var res Result
		if res, err = r.run(s, l); err != nil || interrupted.Load() {
			break
		}
		all = append(all, res)
	}
	setupNote.Stop()
	if interrupted.Load() {
		return ErrInterrupted // a row cut short is not a measurement
	}
	var res Result
	if len(all) > 0 {
		res = medianRound(all)
	}
	if profiling {
		for range s.profileCount() {
			if perr := <-profiles; err == nil && perr != nil {
				err = perr
			}
		}
	}
	if err != nil {
		return err
	}
	s.results[rowKey{r.name, c}] = res
	row := Row{Family: fam, Name: r.name, C: c, Process: r.proc, Result: res}
	if res.FirstErr != nil {
		row.Error = res.FirstErr.Error()
	}
	if b, ok := s.results[rowKey{r.base, c}]; ok && r.base != "" {
		row.Base = r.base
		row.P50Ratio = div(float64(res.P50), float64(b.P50))
		row.P99Ratio = div(float64(res.P99), float64(b.P99))
		row.OpsRatio = div(res.OpsPerSec, b.OpsPerSec)
		row.CPURatio = div(float64(res.CPUPerOp()), float64(b.CPUPerOp()))
	}
	if v, ok := s.results[rowKey{r.vs, c}]; ok && r.vs != "" {
		row.Vs = r.vs
		row.VsOpsRatio = div(res.OpsPerSec, v.OpsPerSec)
	}
	s.rep.Rows = append(s.rep.Rows, row)
	s.logf("%s: %v", label, res)
	return nil
}

// medianRound is the round of median throughput: one real run, so its
// percentiles and CPU belong together.
func medianRound(rounds []Result) Result {
	slices.SortFunc(rounds, func(a, b Result) int { return cmp.Compare(a.OpsPerSec, b.OpsPerSec) })
	return rounds[len(rounds)/2]
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func (s *suite) profileCount() int {
	n := 0
	if s.opts.CPUProfile != "" {
		n++
	}
	if s.opts.MemProfile != "" {
		n++
	}
	return n
}

// startProfiles asks the server for a CPU and/or allocation profile over
// the next d, each sent to done when written.
func (s *suite) startProfiles(fam, name string, c int, d time.Duration, done chan<- error) {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	suffix := fmt.Sprintf("-%s-%s-c%d", fam, name, c)
	if s.opts.CPUProfile != "" {
		go func() {
			done <- s.writeProfile(s.opts.CPUProfile+suffix+".pprof", fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs))
		}()
	}
	if s.opts.MemProfile != "" {
		go func() {
			done <- s.writeProfile(s.opts.MemProfile+suffix+".allocs.pprof", fmt.Sprintf("/debug/pprof/allocs?seconds=%d", secs))
		}()
	}
	// The profile starts when its request arrives: let it get there
	// before the clock starts.
	time.Sleep(20 * time.Millisecond)
}

func (s *suite) writeProfile(path, query string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	err = pprofGet(s.target.Pprof, query, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		s.logf("  wrote %s", path)
	}
	return err
}

// runMemory measures memory per signal and per idle agent, each on a
// fresh child server.
func (s *suite) runMemory() error {
	type m struct {
		name string
		f    func(*ServerProcess) (Memory, error)
	}
	for _, mm := range []m{
		{"memory/per-signal", func(p *ServerProcess) (Memory, error) {
			return MemoryPerSignal(p, s.opts.MemorySignals, s.opts.Progress)
		}},
		{"memory/per-idle-agent", func(p *ServerProcess) (Memory, error) {
			return MemoryPerIdleAgent(p, s.opts.IdleAgents, s.opts.Progress)
		}},
	} {
		if !s.selected(mm.name) {
			continue
		}
		p, err := StartServerProcess(ServerConfig{Bin: s.opts.Bin, Data: s.dir("data-" + filepath.Base(mm.name)), LogDir: s.logs})
		if err != nil {
			return err
		}
		res, err := mm.f(p)
		if err == nil && s.opts.MemProfile != "" {
			// What the stored items keep live, by allocation site.
			s.target = p.Target
			err = s.writeProfile(s.opts.MemProfile+"-memory-"+filepath.Base(mm.name)+"-heap.pprof", "/debug/pprof/heap?gc=1")
		}
		if serr := p.Stop(); err == nil {
			err = serr
		}
		if err != nil {
			return fmt.Errorf("bench: %s: %w", mm.name, err)
		}
		s.logf("%s: %d items, RSS %+.0f B/item, live heap %+.0f B/item", mm.name, res.Items, res.RSSPerItem(), res.HeapPerItem())
		s.rep.Memory = append(s.rep.Memory, res)
	}
	return nil
}

// close stops every child process the suite started.
func (s *suite) close() {
	if s.server != nil {
		_ = s.server.Stop()
	}
	if s.hello != nil {
		_ = s.hello.Stop()
	}
	if s.redis != nil {
		_ = s.redis.Stop()
	}
	if s.redisAOF != nil {
		_ = s.redisAOF.Stop()
	}
}

// Machine is what the figures were measured on.
type Machine struct {
	CPUs   int    `json:"nproc"`
	Model  string `json:"cpu"`
	Go     string `json:"go"`
	OSArch string `json:"os_arch"`
}

// ThisMachine describes this machine: runtime.NumCPU (what nproc shows),
// the first "model name" of /proc/cpuinfo, the Go version.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), OSArch: runtime.GOOS + "/" + runtime.GOARCH}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}
