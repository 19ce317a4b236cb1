package bench

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/valyala/fasthttp"

	"github.com/plaudit/plaudit/persist/pebblelog"
	"github.com/plaudit/plaudit/server"
)

// Key is the admin key of the servers StartServer starts.
const Key = "bench-admin-key"

// valueSize is the raw Pebble value: about one signal event.
const valueSize = 100

// StartServer starts a whole Plaudit on loopback (HTTP and an embedded NATS
// on free ports) over dir, with Key as its admin key. Its HTTP base URL is
// "http://" + s.HTTPAddr().
func StartServer(dir string) (*server.Server, error) {
	return server.Start(server.Config{
		DataDir:      dir,
		HTTPAddr:     "127.0.0.1:0",
		NATSListen:   "127.0.0.1:0",
		BootstrapKey: Key,
	})
}

// RawPebbleAppend is the floor for durable ingest: c workers each doing a
// synced Set of a 100-byte value under a key of their own, n in total, on a
// bare Pebble opened with the store's options in dir.
func RawPebbleAppend(dir string, l Loop) (res Result, err error) {
	db, err := pebblelog.OpenRaw(dir)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("bench: close pebble: %w", cerr)
		}
	}()
	value := make([]byte, valueSize)
	return l.Run(func(w int) (Op, error) {
		// bench/<worker>/<seq>: unique, and ascending per worker like an
		// agent's log. Pebble copies key and value, so the buffer is reused.
		key := fmt.Appendf(nil, "bench/%03d/", w)
		prefix, seq := len(key), uint64(0)
		key = binary.BigEndian.AppendUint64(key, 0)
		return func() error {
			seq++
			binary.BigEndian.PutUint64(key[prefix:], seq)
			return db.Set(key, value, pebble.Sync)
		}, nil
	})
}

// HTTPSignalIngest creates one agent and one run on the server at baseURL,
// then has c workers post n signals to that run in total, each over its own
// keep-alive connection. Every signal must answer 201; a 201 means it was
// synced to disk.
func HTTPSignalIngest(baseURL, key string, l Loop) (Result, error) {
	return signalIngest(baseURL, key, l, false)
}

// HTTPSignalIngestAgents is HTTPSignalIngest with one agent (and run) per
// worker: concurrent signals of different agents share fsyncs (group
// commit) rather than queueing behind one actor.
func HTTPSignalIngestAgents(baseURL, key string, l Loop) (Result, error) {
	return signalIngest(baseURL, key, l, true)
}

func signalIngest(baseURL, key string, l Loop, agentPerWorker bool) (Result, error) {
	cl, err := newClient(baseURL, key, l.C)
	if err != nil {
		return Result{}, err
	}
	defer cl.hc.CloseIdleConnections()
	var shared target
	if !agentPerWorker {
		if shared, err = cl.newTarget("bench"); err != nil {
			return Result{}, err
		}
	}
	return l.Run(func(w int) (Op, error) {
		t := shared
		if agentPerWorker {
			var err error
			if t, err = cl.newTarget(fmt.Sprintf("bench-%03d", w)); err != nil {
				return nil, err
			}
		}
		return cl.postOp("/api/v1/agents/"+t.agent+"/signals", signalBody(t.run), 201), nil
	})
}

func signalBody(runID string) []byte {
	return fmt.Appendf(nil, `{"kind":"bench.value","value":0.5,"run_id":%q}`, runID)
}

// helloBody is what the hello server answers: about the size of a small
// Plaudit answer.
var helloBody = []byte(`{"status":"ok"}`)

// FasthttpHello is HTTPHello against a hello server in this process (for
// the Go benchmarks, where the server under test is in process too).
func FasthttpHello(l Loop) (Result, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, fmt.Errorf("bench: hello listen: %w", err)
	}
	srv := helloServer(nil)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer func() {
		_ = srv.Shutdown()
		<-done
	}()
	return HTTPHello("http://"+ln.Addr().String(), l)
}

// StatusError is an HTTP answer with a status other than the one expected.
type StatusError struct {
	Status     int
	RetryAfter string
	Body       string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("HTTP %d", e.Status)
	if e.RetryAfter != "" {
		s += " (Retry-After " + e.RetryAfter + ")"
	}
	return s + ": " + e.Body
}

// client is a keep-alive fasthttp client for one server.
type client struct {
	hc   *fasthttp.HostClient
	base string
	auth string
}

// newClient makes a client with room for conns connections, one per
// worker, so no worker waits for another's connection.
func newClient(baseURL, key string, conns int) (*client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("bench: base URL %q: want http://host:port", baseURL)
	}
	cl := &client{
		hc: &fasthttp.HostClient{
			Addr:                u.Host,
			MaxConns:            conns + 1, // +1 for setup calls
			MaxConnWaitTimeout:  10 * time.Second,
			ReadTimeout:         30 * time.Second,
			WriteTimeout:        30 * time.Second,
			MaxIdleConnDuration: time.Minute,
		},
		base: "http://" + u.Host,
	}
	if key != "" {
		cl.auth = "Bearer " + key
	}
	return cl, nil
}

func (cl *client) request(path string, body []byte) *fasthttp.Request {
	req := new(fasthttp.Request)
	req.SetRequestURI(cl.base + path)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	if cl.auth != "" {
		req.Header.Set("Authorization", cl.auth)
	}
	req.SetBody(body)
	return req
}

// postOp is an Op posting body to path and expecting status want. The
// request is built once and reused: HostClient.Do does not keep it.
func (cl *client) postOp(path string, body []byte, want int) Op {
	req, resp := cl.request(path, body), new(fasthttp.Response)
	return func() error {
		if err := cl.hc.Do(req, resp); err != nil {
			return err
		}
		return checkStatus(resp, want)
	}
}

func checkStatus(resp *fasthttp.Response, want int) error {
	if resp.StatusCode() == want {
		return nil
	}
	b := resp.Body()
	if len(b) > 300 {
		b = b[:300]
	}
	return &StatusError{Status: resp.StatusCode(), RetryAfter: string(resp.Header.Peek("Retry-After")), Body: string(b)}
}

// do sends one setup request, expects status want and returns the body.
func (cl *client) do(path string, body []byte, want int) ([]byte, error) {
	req, resp := cl.request(path, body), new(fasthttp.Response)
	if err := cl.hc.Do(req, resp); err != nil {
		return nil, fmt.Errorf("bench: POST %s: %w", path, err)
	}
	if err := checkStatus(resp, want); err != nil {
		return nil, fmt.Errorf("bench: POST %s: %w", path, err)
	}
	return resp.Body(), nil
}

// post sends one setup request and decodes the id of what it created.
func (cl *client) post(path string, body []byte) (string, error) {
	b, err := cl.do(path, body, 201)
	if err != nil {
		return "", err
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &created); err != nil || created.ID == "" {
		return "", fmt.Errorf("bench: POST %s: no id in %q", path, b)
	}
	return created.ID, nil
}

// target is where a worker posts its signals.
type target struct{ agent, run string }

func (cl *client) newTarget(name string) (target, error) {
	agent, err := cl.post("/api/v1/agents", fmt.Appendf(nil, `{"name":%q}`, name))
	if err != nil {
		return target{}, err
	}
	run, err := cl.post("/api/v1/agents/"+agent+"/runs", []byte(`{}`))
	if err != nil {
		return target{}, err
	}
	return target{agent, run}, nil
}
