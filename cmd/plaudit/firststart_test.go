package main

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFirstStartAsANewUserSeesIt: the binary, configured by PLAUDIT_*
// variables alone, refuses a taken port at once (exit 1, the address and
// "already in use"); the next start prints an admin key that works. The
// same for the HTTP and the NATS port. And --help exits 0.
func TestFirstStartAsANewUserSeesIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin := buildPlaudit(t)
	if out, err := exec.Command(bin, "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "serve") {
		t.Fatalf("plaudit --help: %v\n%s", err, out)
	}
	for _, port := range []string{"PLAUDIT_HTTP", "PLAUDIT_NATS_LISTEN"} {
		t.Run(port, func(t *testing.T) {
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			data := filepath.Join(t.TempDir(), "data")
			env := map[string]string{"PLAUDIT_DATA": data, "PLAUDIT_HTTP": freeAddr(t),
				"PLAUDIT_NATS_LISTEN": freeAddr(t), "PLAUDIT_LOG_LEVEL": "warn", "PLAUDIT_BOOTSTRAP_KEY": ""}
			env[port] = taken.Addr().String()

			cmd := serveCmdEnv(bin, env)
			began := time.Now()
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("on a taken port: %v\n%s", err, out)
			}
			if took := time.Since(began); took > 5*time.Second {
				t.Errorf("took %v to fail", took)
			}
			for _, want := range []string{taken.Addr().String(), "already in use"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}

			env[port] = freeAddr(t)
			cmd = serveCmdEnv(bin, env)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			line, err := bufio.NewReader(stdout).ReadString('\n')
			key, ok := strings.CutPrefix(strings.TrimSpace(line), "admin key (shown once, keep it): ")
			if err != nil || !ok {
				t.Fatalf("the start after the failed one printed %q (%v), not an admin key", line, err)
			}
			req, _ := http.NewRequest("GET", "http://"+env["PLAUDIT_HTTP"]+"/v1/workspaces", nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("a request with the admin key: %d", resp.StatusCode)
			}
		})
	}
}

// serveCmdEnv is `bin serve` with the environment env on top of this
// process's (PLAUDIT_* variables of the caller dropped).
func serveCmdEnv(bin string, env map[string]string) *exec.Cmd {
	cmd := exec.Command(bin, "serve")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PLAUDIT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		if v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	return cmd
}
