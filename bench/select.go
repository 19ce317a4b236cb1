package bench

import (
	"errors"
	"fmt"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// SelectVariations is how many variations NewSelectAgent gives its agent,
// and selectFeedback how many scored runs each of them has had.
const (
	SelectVariations = 8
	selectFeedback   = 3
)

// selectBody is the body of every selection request, and of the echo
// requests measured against them.
var selectBody = []byte(`{}`)

// natsTimeout bounds one request; it matches the HTTP client's timeouts.
const natsTimeout = 30 * time.Second

// requestersPerConn is how many concurrent requesters share one NATS
// connection, as the goroutines of one client process would.
const requestersPerConn = 16

// NewSelectAgent makes, on the server at baseURL, an agent whose selection
// does real work: SelectVariations variations, each with selectFeedback
// runs pinned to it and scored, the scores spread from -1 for the first
// variation to +1 for the last, so that the posteriors differ and most of
// their parameters are not integers. It returns the agent's id.
func NewSelectAgent(baseURL, key string) (string, error) {
	cl, err := newClient(baseURL, key, 1)
	if err != nil {
		return "", err
	}
	defer cl.hc.CloseIdleConnections()
	agent, err := cl.post("/api/v1/agents", []byte(`{"name":"bench-select"}`))
	if err != nil {
		return "", err
	}
	for i := range SelectVariations {
		v, err := cl.post("/api/v1/agents/"+agent+"/variations", fmt.Appendf(nil, `{"name":"v%d"}`, i+1))
		if err != nil {
			return "", err
		}
		score := -1 + 2*float64(i)/(SelectVariations-1)
		for range selectFeedback {
			run, err := cl.post("/api/v1/agents/"+agent+"/runs", fmt.Appendf(nil, `{"variation_id":%q}`, v))
			if err != nil {
				return "", err
			}
			path := "/v1/workspaces/default/objectives/" + run + "/feedback"
			if _, err := cl.do(path, fmt.Appendf(nil, `{"metadata":{},"data":{"score":%g}}`, score), 200); err != nil {
				return "", err
			}
		}
	}
	return agent, nil
}

// NATSSelect has c concurrent requesters create n runs in total through
// the NATS door at natsURL (plaudit.v1.default.<agentID>.select, body {}),
// requestersPerConn of them to a connection. A reply carrying an error
// code header is a failed operation (a *NATSError).
func NATSSelect(natsURL, key, agentID string, l Loop) (Result, error) {
	return natsRequests(natsURL, "plaudit.v1.default."+agentID+".select", key, l)
}

// NATSEcho is the floor for any NATS answer: a bare subscriber (no micro
// service, no goroutine per request) connected in process to an embedded
// nats-server on loopback, as Plaudit's door is, responding with the
// request's own body, hit like NATSSelect:
// same connections, concurrency, header and body.
func NATSEcho(l Loop) (res Result, err error) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoSigs: true, NoLog: true})
	if err != nil {
		return Result{}, fmt.Errorf("bench: echo nats: %w", err)
	}
	ns.Start()
	defer func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	}()
	if !ns.ReadyForConnections(10 * time.Second) {
		return Result{}, errors.New("bench: echo nats: not ready after 10s")
	}
	responder, err := nats.Connect(ns.ClientURL(), nats.Name("bench-echo"), nats.InProcessServer(ns))
	if err != nil {
		return Result{}, fmt.Errorf("bench: echo connect: %w", err)
	}
	defer responder.Close()
	if _, err := responder.Subscribe("bench.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		return Result{}, fmt.Errorf("bench: echo subscribe: %w", err)
	}
	// The subscription must reach the server before the first request,
	// or that request finds no responder.
	if err := responder.Flush(); err != nil {
		return Result{}, fmt.Errorf("bench: echo flush: %w", err)
	}
	return natsRequests(ns.ClientURL(), "bench.echo", Key, l)
}

// NATSError is a NATS reply that carries Nats-Service-Error-Code.
type NATSError struct {
	Code        string // the HTTP status, as text
	Description string
	Body        string
}

func (e *NATSError) Error() string {
	return fmt.Sprintf("NATS error %s (%s): %s", e.Code, e.Description, e.Body)
}

// natsRequests runs c requesters sending n requests in total to subject,
// connected with key as their NATS token.
func natsRequests(url, subject, key string, l Loop) (res Result, err error) {
	return natsRequestsBody(url, subject, key, selectBody, l)
}

// natsRequestsBody is natsRequests with body as every request's body.
func natsRequestsBody(url, subject, key string, body []byte, l Loop) (res Result, err error) {
	conns := make([]*nats.Conn, (l.C+requestersPerConn-1)/requestersPerConn)
	defer func() {
		for _, nc := range conns {
			if nc != nil {
				nc.Close()
			}
		}
	}()
	for i := range conns {
		if conns[i], err = nats.Connect(url, nats.Name(fmt.Sprintf("bench-%d", i)), nats.Token(key)); err != nil {
			return Result{}, fmt.Errorf("bench: nats connect: %w", err)
		}
	}
	return l.Run(func(w int) (Op, error) {
		return natsRequestOp(conns[w/requestersPerConn], subject, key, body), nil
	})
}

// natsRequestOp is an Op sending one request and checking its reply. The
// message is built once: RequestMsg neither keeps nor changes it.
func natsRequestOp(nc *nats.Conn, subject, key string, body []byte) Op {
	msg := nats.NewMsg(subject)
	msg.Header.Set("Authorization", "Bearer "+key)
	msg.Data = body
	return func() error {
		rep, err := nc.RequestMsg(msg, natsTimeout)
		if err != nil {
			return err
		}
		if code := rep.Header.Get(micro.ErrorCodeHeader); code != "" {
			b := rep.Data
			if len(b) > 300 {
				b = b[:300]
			}
			return &NATSError{Code: code, Description: rep.Header.Get(micro.ErrorHeader), Body: string(b)}
		}
		return nil
	}
}

// HTTPSelect has c workers create n runs in total through the HTTP door at
// baseURL (POST /api/v1/agents/<agentID>/runs, body {}), each over its own
// keep-alive connection. Every run must answer 201.
func HTTPSelect(baseURL, key, agentID string, l Loop) (Result, error) {
	cl, err := newClient(baseURL, key, l.C)
	if err != nil {
		return Result{}, err
	}
	defer cl.hc.CloseIdleConnections()
	return l.Run(func(int) (Op, error) {
		return cl.postOp("/api/v1/agents/"+agentID+"/runs", selectBody, 201), nil
	})
}
