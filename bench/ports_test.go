package bench

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// A child that exits because a port it was given was taken meanwhile is
// started again on other ports; one that fails otherwise is not.
func TestAChildWhosePortWasTakenIsStartedAgain(t *testing.T) {
	dir := t.TempDir()
	child := func(message string) error {
		p, err := startProcess("/bin/sh", []string{"-c", "echo '" + message + "' >&2; exit 1"}, nil,
			filepath.Join(dir, "child.log"))
		if err != nil {
			t.Fatal(err)
		}
		return p.waitHealthy("http://127.0.0.1:1/healthz", 10*time.Second)
	}
	for _, tc := range []struct {
		name    string
		message string
		starts  int
	}{
		{"port taken", "plaudit: http: listen tcp 127.0.0.1:11163: bind: address already in use", 2},
		{"another failure", "plaudit: --data: permission denied", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			starts := 0
			addr, err := startOnFreePorts(1, func(addrs []string) (string, error) {
				starts++
				if starts == 1 {
					return "", child(tc.message)
				}
				return addrs[0], nil
			})
			if starts != tc.starts {
				t.Fatalf("started %d times, want %d (err %v)", starts, tc.starts, err)
			}
			if tc.starts == 2 && (err != nil || addr == "") {
				t.Fatalf("the second start: %q, %v", addr, err)
			}
			if tc.starts == 1 && (err == nil || errors.Is(err, errPortTaken)) {
				t.Fatalf("another failure: %v, want it as it was", err)
			}
		})
	}
}
