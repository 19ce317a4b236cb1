package bench

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/plaudit/plaudit/internal/freeport"
)

// Process is a child process the harness started: a Plaudit server, the
// baseline responders (`plaudit bench-hello`) or a redis-server. Its
// output goes to a log file, shown when it fails to start.
type Process struct {
	PID  int
	Log  string // path of its stdout and stderr
	cmd  *exec.Cmd
	done chan error // receives Wait's result once
	exit error
	gone bool
}

// startProcess starts bin with args and env (added to the harness's own),
// output to logPath.
func startProcess(bin string, args, env []string, logPath string) (*Process, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", bin, err)
	}
	p := &Process{PID: cmd.Process.Pid, Log: logPath, cmd: cmd, done: make(chan error, 1)}
	live.Store(p, struct{}{})
	go func() {
		err := cmd.Wait()
		live.Delete(p)
		p.done <- err
	}()
	return p, nil
}

// live holds the child processes not yet exited, for Interrupt.
var live sync.Map // *Process → struct{}

// interrupted is set by Interrupt: loops stop claiming operations and the
// suite starts no further row.
var interrupted atomic.Bool

// ErrInterrupted is Run's error after Interrupt.
var ErrInterrupted = errors.New("bench: interrupted")

// Interrupt stops the run in progress: the loop running finishes the
// operations in flight, no further row starts, and every child process
// still running gets SIGTERM, so that a harness stopped by a signal leaves
// no server behind. Run then returns ErrInterrupted with what it measured.
func Interrupt() {
	interrupted.Store(true)
	live.Range(func(k, _ any) bool {
		_ = k.(*Process).cmd.Process.Signal(syscall.SIGTERM)
		return true
	})
}

// exited reports whether the process has ended, without waiting.
func (p *Process) exited() bool {
	if p.gone {
		return true
	}
	select {
	case p.exit = <-p.done:
		p.gone = true
	default:
	}
	return p.gone
}

// Stop sends SIGTERM and waits up to a minute for the process to end
// (a server drains and syncs first), then SIGKILLs it.
func (p *Process) Stop() error {
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case p.exit = <-p.done:
		p.gone = true
		var ee *exec.ExitError
		if errors.As(p.exit, &ee) {
			return fmt.Errorf("bench: %s exited: %w\n%s", filepath.Base(p.cmd.Path), p.exit, p.output())
		}
		return nil
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		p.exit, p.gone = <-p.done, true
		return fmt.Errorf("bench: %s did not stop within a minute of SIGTERM; killed", filepath.Base(p.cmd.Path))
	}
}

// output is the tail of the process's log.
func (p *Process) output() string {
	b, _ := os.ReadFile(p.Log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// CPU is the user plus system time the process has used so far; zero where
// /proc is not readable.
func (p *Process) CPU() time.Duration { return procCPU(p.PID) }

// waitHealthy polls url until it answers 200, the process exits or
// timeout passes.
func (p *Process) waitHealthy(url string, timeout time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		if p.exited() {
			out := p.output()
			err := fmt.Errorf("bench: %s exited before it was healthy: %v\n%s", filepath.Base(p.cmd.Path), p.exit, out)
			if strings.Contains(out, "address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		}
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %s not healthy after %v\n%s", url, timeout, p.output())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// errPortTaken is waitHealthy's error for a child that found a port it was
// given taken: freeAddr's ports were free a moment before, and another
// process (a test beside the harness's, say) may bind one first. The
// child is started again on other ports (startOnFreePorts).
var errPortTaken = errors.New("bench: a port given to the child was taken meanwhile")

// startOnFreePorts runs start with n fresh free addresses, again with
// others while it fails with errPortTaken, up to three times.
func startOnFreePorts[P any](n int, start func(addrs []string) (P, error)) (P, error) {
	for attempt := 1; ; attempt++ {
		addrs, err := freeport.Addrs(n)
		if err != nil {
			var zero P
			return zero, fmt.Errorf("bench: %w", err)
		}
		p, err := start(addrs)
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			return p, err
		}
	}
}

// freeAddr is a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	addrs, err := freeport.Addrs(1)
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	return addrs[0], nil
}

// newKey is a random admin key for a child server.
func newKey() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "pl_bench_" + hex.EncodeToString(b)
}
