package bench

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/valyala/fasthttp"

	"github.com/plaudit/plaudit/transport/natsdoor"
)

// echoSubject is where the hello process's echo answers: a service subject
// of workspace default, which a key's connection may publish to.
const echoSubject = "plaudit.v1.default.bench.echo"

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
//     costs on Plaudit's NATS set-up.
//
// key is the one token the NATS server accepts (workspace default).
//
// Why not an echo on the running Plaudit's own NATS server: there every
// key's connection lives in an account of its own and reaches only the
// service's subjects, so only a process holding Plaudit's service nkey
// could answer there. The same set-up in another process is the closest
// floor the harness can measure from outside.
func ServeHello(httpAddr, natsAddr, key string, stop <-chan struct{}) error {
	host, portText, err := net.SplitHostPort(natsAddr)
	if err != nil {
		return fmt.Errorf("bench-hello: --nats: %w", err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return fmt.Errorf("bench-hello: --nats port: %w", err)
	}
	e, err := natsdoor.NewEmbedded(func(token string) (string, string, bool) {
		return "bench-key", "default", token == key
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
	if err := responder.Flush(); err != nil {
		return fmt.Errorf("bench-hello: echo flush: %w", err)
	}
	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return fmt.Errorf("bench-hello: %w", err)
	}
	srv := helloServer()
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
// style guide asks of every fasthttp server.
func helloServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("application/json")
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
	cl, err := newClient(baseURL, "", l.C)
	if err != nil {
		return Result{}, err
	}
	defer cl.hc.CloseIdleConnections()
	body := signalBody("run_00000000000000000000000000")
	return l.Run(func(int) (Op, error) {
		return cl.postOp("/api/v1/agents/agt_00000000000000000000000000/signals", body, 200), nil
	})
}

// NATSHelloEcho requests the hello process's echo at natsURL, connected
// with key as the token, exactly as NATSSelect requests a selection: same
// connections per requester, header and body.
func NATSHelloEcho(natsURL, key string, l Loop) (Result, error) {
	return natsRequests(natsURL, echoSubject, key, l)
}
