package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/plaudit/plaudit/internal/logtest"
)

// TestAccessLogOneLinePerRequest: with AccessLog, every request on either
// door is one INFO line naming its request id (the X-Request-Id answered),
// workspace, door, operation, status and duration.
func TestAccessLogOneLinePerRequest(t *testing.T) {
	log := &logtest.Recorder{}
	s := startServer(t, Config{AccessLog: true, Logger: slog.New(log)})
	c := newClient(t, s, adminKey)
	created := c.request("POST", "/api/v1/agents", `{"name": "a"}`, nil)
	agent := str(t, created.json(t), "id")
	missing := c.request("GET", "/api/v1/agents/agt_nope", "", nil)
	nc, err := nats.Connect(s.NATSURL(), nats.Token(adminKey))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msg := nats.NewMsg("plaudit.v1.default." + agent + ".signal")
	msg.Data = []byte(`{"kind": "k", "value": 1}`) // no run_id: 400
	reply, err := nc.RequestMsg(msg, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		requestID, want string
	}{
		{created.header.Get("X-Request-Id"), "workspace=default door=http op=create_agent status=201 duration="},
		{missing.header.Get("X-Request-Id"), "workspace=default door=http op=get_agent status=404 duration="},
		{reply.Header.Get("X-Request-Id"), "workspace=default door=nats op=record_signal status=400 duration="},
	} {
		prefix := "INFO request request_id=" + tc.requestID + " "
		var lines []string
		for _, l := range log.Lines() {
			if strings.HasPrefix(l, prefix) {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.HasPrefix(lines[0], prefix+tc.want) {
			t.Errorf("access log lines of %s = %q, want one %q", tc.requestID, lines, prefix+tc.want+"…")
		}
	}
	if n := log.Count("INFO request "); n != 3 {
		t.Errorf("%d access log lines, want 3:\n%s", n, log)
	}
}

// TestNoAccessLogByDefault: without AccessLog a request logs nothing.
func TestNoAccessLogByDefault(t *testing.T) {
	log := &logtest.Recorder{}
	s := startServer(t, Config{Logger: slog.New(log)})
	newClient(t, s, adminKey).must(201, "POST", "/api/v1/agents", `{"name": "a"}`)
	if n := log.Count("INFO request "); n != 0 {
		t.Fatalf("%d access log lines without AccessLog:\n%s", n, log)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestJSONLogFormat: NewLogger("json") writes one JSON object a line; the
// access log line carries its fields as members.
func TestJSONLogFormat(t *testing.T) {
	var out syncBuffer
	logger, err := NewLogger("json", "info", &out)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, Config{AccessLog: true, Logger: logger})
	r := newClient(t, s, adminKey).request("POST", "/api/v1/agents", `{"name": "a"}`, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var access map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %v\n%s", err, line)
		}
		if m["msg"] == "request" {
			access = m
		}
	}
	want := map[string]any{"level": "INFO", "request_id": r.header.Get("X-Request-Id"), "workspace": "default",
		"door": "http", "op": "create_agent", "status": float64(201)}
	for k, v := range want {
		if access[k] != v {
			t.Errorf("access log %s = %v, want %v (line %v)", k, access[k], v, access)
		}
	}
	if d, ok := access["duration"].(float64); !ok || d <= 0 {
		t.Errorf("access log duration = %v, want nanoseconds > 0", access["duration"])
	}
}

func TestNewLogger(t *testing.T) {
	for _, tc := range []struct {
		format, level string
		err           error
		debug         bool // whether a DEBUG line is written
		prefix        string
	}{
		{"", "", nil, false, "time="},
		{"text", "debug", nil, true, "time="},
		{"json", "warn", nil, false, "{"},
		{"yaml", "info", ErrLogFormat, false, ""},
		{"text", "loud", errors.New("any"), false, ""},
	} {
		var out bytes.Buffer
		l, err := NewLogger(tc.format, tc.level, &out)
		if tc.err != nil {
			if err == nil || errors.Is(tc.err, ErrLogFormat) && !errors.Is(err, ErrLogFormat) {
				t.Errorf("NewLogger(%q, %q) = %v, want %v", tc.format, tc.level, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("NewLogger(%q, %q): %v", tc.format, tc.level, err)
		}
		l.Debug("d")
		l.Error("e")
		if got := strings.Count(out.String(), "\n"); got != map[bool]int{false: 1, true: 2}[tc.debug] || !strings.HasPrefix(out.String(), tc.prefix) {
			t.Errorf("NewLogger(%q, %q) wrote %q", tc.format, tc.level, out.String())
		}
	}
}
