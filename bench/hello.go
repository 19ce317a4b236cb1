package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/valyala/fasthttp"

	"github.com/plaudit/plaudit/persist/pebblelog"
	"github.com/plaudit/plaudit/transport/natsdoor"
)

// echoSubject is where the hello process's echo answers: a service subject
// of workspace default, which a key's connection may publish to;
// durableSubject is where its durable floor answers.
const (
	echoSubject    = "plaudit.v1.default.bench.echo"
	durableSubject = "plaudit.v1.default.bench.durable"
)

// durablePath is the hello server's path whose answers each wait for one
// synced append (see durableFloor); every other path answers at once.
const durablePath = "/durable"

// ServeHello runs the floors of the two doors, for `plaudit bench-hello`,
// until stop is closed:
//
//   - on httpAddr, a bare fasthttp server answering every request 200 with
//     helloBody: what any HTTP answer costs with the same server library
//     and the same client;
//   - on natsAddr, a NATS server set up exactly as Plaudit's embedded one
//     (natsdoor.Embedded: key as token, a connection account per
//     connection, requests reaching the service account through a service
//     import) with a bare subscriber on the service account answering
//     every request on echoSubject with its own body: what any NATS answer
//     costs on Plaudit's NATS set-up;
//   - with dataDir, the durable floor: on durablePath and durableSubject,
//     every answer waits for one synced Pebble append of valueSize bytes to
//     a bare Pebble in dataDir (durableFloor). That is what a durable write
//     costs through these libraries with nothing of Plaudit's in the way:
//     the door's round trip and the fsync, as they meet on this machine.
//
// key is the one token the NATS server accepts (workspace default).
//
// Why not an echo on the running Plaudit's own NATS server: there every
// key's connection lives in an account of its own and reaches only the
// service's subjects, so only a process holding Plaudit's service nkey
// could answer there. The same set-up in another process is the closest
// floor the harness can measure from outside.
func ServeHello(httpAddr, natsAddr, dataDir, key string, stop <-chan struct{}) (err error) {
	var floor *durableFloor
	if dataDir != "" {
		if floor, err = openDurableFloor(dataDir); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, floor.close()) }()
	}
	host, portText, err := net.SplitHostPort(natsAddr)
	if err != nil {
		return fmt.Errorf("bench-hello: --nats: %w", err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return fmt.Errorf("bench-hello: --nats port: %w", err)
	}
	e, err := natsdoor.NewEmbedded(func(token string) (natsdoor.Key, bool) {
		return natsdoor.Key{ID: "bench_key", Workspace: "default"}, token == key
	})
	if err != nil {
		return err
	}
	ns, err := e.Start(e.Options(host, port))
	if err != nil {
		return err
	}
	defer func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	}()
	// In process, as Plaudit's door is connected to its embedded server.
	responder, err := nats.Connect(ns.ClientURL(), append(e.ConnectOptions(), nats.Name("bench-echo"), nats.InProcessServer(ns))...)
	if err != nil {
		return fmt.Errorf("bench-hello: echo connect: %w", err)
	}
	defer responder.Close()
	if _, err := responder.Subscribe(echoSubject, func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		return fmt.Errorf("bench-hello: echo subscribe: %w", err)
	}
	if floor != nil {
		if _, err := responder.Subscribe(durableSubject, floor.serveNATS); err != nil {
			return fmt.Errorf("bench-hello: durable subscribe: %w", err)
		}
	}
	if err := responder.Flush(); err != nil {
		return fmt.Errorf("bench-hello: echo flush: %w", err)
	}
	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return fmt.Errorf("bench-hello: %w", err)
	}
	srv := helloServer(floor)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-stop:
		return srv.Shutdown()
	}
}

// helloServer is the fixed-body fasthttp server, with the timeouts the
// style guide asks of every fasthttp server; with a floor, its durablePath
// answers 201 once the floor has appended (500 if it failed).
func helloServer(floor *durableFloor) *fasthttp.Server {
	return &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("application/json")
			if floor != nil && string(ctx.Path()) == durablePath {
				if err := floor.append(); err != nil {
					ctx.SetStatusCode(fasthttp.StatusInternalServerError)
					ctx.SetBody(fmt.Appendf(nil, `{"error":%q}`, err.Error()))
					return
				}
				ctx.SetStatusCode(fasthttp.StatusCreated)
			}
			ctx.SetBody(helloBody)
		},
		ReadTimeout:        30 * time.Second,
		WriteTimeout:       30 * time.Second,
		IdleTimeout:        time.Minute,
		MaxRequestBodySize: 1 << 20,
	}
}

// HTTPHello posts the body of a signal to the hello server at baseURL,
// through the client every HTTP row uses; every answer must be 200.
func HTTPHello(baseURL string, l Loop) (Result, error) {
	return helloPosts(baseURL, "/api/v1/agents/agt_00000000000000000000000000/signals", 200, l)
}

// HTTPDurableHello is HTTPHello on the hello server's durablePath: every
// answer must be 201, once its append is synced.
func HTTPDurableHello(baseURL string, l Loop) (Result, error) {
	return helloPosts(baseURL, durablePath, 201, l)
}

// helloPosts posts the body of a signal to path on the hello server, each
// answer to be want.
func helloPosts(baseURL, path string, want int, l Loop) (Result, error) {
	cl, err := newClient(baseURL, "", l.C)
	if err != nil {
		return Result{}, err
	}
	defer cl.hc.CloseIdleConnections()
	body := signalBody("run_00000000000000000000000000")
	return l.Run(func(int) (Op, error) { return cl.postOp(path, body, want), nil })
}

// NATSDurableEcho requests the hello process's durable floor at natsURL
// with the body of a signal, as NATSSignalIngest does; every reply must
// come without an error header, once its append is synced.
func NATSDurableEcho(natsURL, key string, l Loop) (Result, error) {
	return natsRequestsBody(natsURL, durableSubject, key, signalBody("run_00000000000000000000000000"), l)
}

// NATSHelloEcho requests the hello process's echo at natsURL, connected
// with key as the token, exactly as NATSSelect requests a selection: same
// connections per requester, header and body.
func NATSHelloEcho(natsURL, key string, l Loop) (Result, error) {
	return natsRequests(natsURL, echoSubject, key, l)
}

// durableFloor appends to a bare Pebble opened with the store's options
// (pebblelog.OpenRaw), one synced Set of valueSize bytes an answer, as
// raw-pebble's writers do. Concurrent answers commit concurrently and share
// fsyncs in Pebble's commit pipeline.
type durableFloor struct {
	// mu is read-held by every append and write-held by close, as the
	// store's is: Pebble panics on use after Close, and a NATS request's
	// goroutine may still be appending when the process stops.
	mu     sync.RWMutex
	closed bool
	db     *pebble.DB
	seq    atomic.Uint64
	value  []byte
}

var errFloorClosed = errors.New("bench-hello: durable floor closed")

func openDurableFloor(dir string) (*durableFloor, error) {
	db, err := pebblelog.OpenRaw(dir)
	if err != nil {
		return nil, fmt.Errorf("bench-hello: durable floor: %w", err)
	}
	return &durableFloor{db: db, value: make([]byte, valueSize)}, nil
}

// append writes the next key (bench/<seq>, ascending as an agent's log)
// and returns once it is synced.
func (f *durableFloor) append() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return errFloorClosed
	}
	key := binary.BigEndian.AppendUint64([]byte("bench/"), f.seq.Add(1))
	return f.db.Set(key, f.value, pebble.Sync)
}

// serveNATS answers a request on durableSubject once its append is synced,
// on a goroutine of its own: a subscription's callbacks run one at a time,
// so appending on the callback's goroutine would give every request an
// fsync of its own.
func (f *durableFloor) serveNATS(m *nats.Msg) {
	go func() {
		if err := f.append(); err != nil {
			rep := nats.NewMsg(m.Reply)
			rep.Header.Set(micro.ErrorCodeHeader, "500")
			rep.Header.Set(micro.ErrorHeader, err.Error())
			_ = m.RespondMsg(rep)
			return
		}
		_ = m.Respond(helloBody)
	}()
}

// close waits for the appends in progress and closes the Pebble; later
// appends fail.
func (f *durableFloor) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return f.db.Close()
}
