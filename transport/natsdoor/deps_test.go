package natsdoor

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering checks the architecture's one-way flow with go list: door →
// service → actors → engine, persist beside actors. Neither door knows the
// other's wire, the service knows no wire at all, and the engine imports
// nothing of Plaudit but itself.
func TestLayering(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	const mod = "github.com/plaudit/plaudit/"
	rules := []struct {
		pkg       string
		forbidden []string
	}{
		{mod + "transport/natsdoor", []string{"github.com/valyala/fasthttp", mod + "transport/httpdoor", mod + "transport/console"}},
		{mod + "transport/httpdoor", []string{"github.com/nats-io/", mod + "transport/natsdoor", mod + "transport/console"}},
		{mod + "transport/console", []string{"github.com/valyala/fasthttp", mod + "transport/httpdoor", mod + "transport/natsdoor"}},
		{mod + "transport/api", []string{"github.com/valyala/fasthttp", "github.com/nats-io/", mod + "transport/httpdoor", mod + "transport/natsdoor"}},
		{mod + "actors", []string{mod + "transport/", "github.com/valyala/fasthttp", "github.com/nats-io/"}},
		{mod + "engine", []string{mod + "actors", mod + "persist", mod + "transport/", "github.com/cockroachdb/pebble"}},
		// The cluster's log is storage, beside the actors; the cluster's
		// leases know no door.
		{mod + "persist/jslog", []string{mod + "actors", mod + "transport/", mod + "cluster", "github.com/valyala/fasthttp"}},
		{mod + "cluster", []string{mod + "transport/", "github.com/valyala/fasthttp"}},
	}
	check(t, goTool, "-deps", rules)
	// The console is a door: it reaches the actors and the engine only
	// through the service, which itself depends on them, so this rule is on
	// its own imports.
	check(t, goTool, "-f={{join .Imports \"\\n\"}}", []struct {
		pkg       string
		forbidden []string
	}{{mod + "transport/console", []string{mod + "actors", mod + "engine", mod + "persist"}}})
}

func check(t *testing.T, goTool, flag string, rules []struct {
	pkg       string
	forbidden []string
}) {
	t.Helper()
	for _, r := range rules {
		out, err := exec.Command(goTool, "list", flag, r.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", r.pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range r.forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s depends on %s", r.pkg, dep)
				}
			}
		}
	}
}
