package transport

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine/field"
)

// NATSConfig configures the NATS door; zero fields take defaults.
type NATSConfig struct {
	// InFlight bounds requests being served at once; past it requests are
	// answered 503 at once rather than queued without limit.
	InFlight int
	// PendingMsgs bounds each endpoint's subscription buffer.
	PendingMsgs int
}

// NATS is the request-reply door: a nats.go micro service named "plaudit"
// with endpoints on plaudit.v1.<ws>.<agent>.<op>. Bodies and replies are
// the HTTP JSON shapes; it answers through the same handlers as the HTTP
// door, so both answer the same failure the same way.
type NATS struct {
	nc      *nats.Conn
	h       *HTTP
	svc     micro.Service
	sem     chan struct{}
	serving sync.WaitGroup
}

// natsOps are the operations of the NATS door.
var natsOps = []string{"select", "finish", "signal", "feedback", "reward", "variation"}

// StartNATS registers the service on nc.
func StartNATS(nc *nats.Conn, h *HTTP, version string, cfg NATSConfig) (*NATS, error) {
	if cfg.InFlight <= 0 {
		cfg.InFlight = 4096
	}
	if cfg.PendingMsgs <= 0 {
		cfg.PendingMsgs = 65536
	}
	n := &NATS{nc: nc, h: h, sem: make(chan struct{}, cfg.InFlight)}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        "plaudit",
		Version:     version,
		Description: "Plaudit reward engine: select, finish, signal, feedback, reward, variation",
	})
	if err != nil {
		return nil, fmt.Errorf("nats service: %w", err)
	}
	for _, op := range natsOps {
		err := svc.AddEndpoint(op, micro.HandlerFunc(n.handle),
			micro.WithEndpointSubject("plaudit.v1.*.*."+op),
			micro.WithEndpointPendingLimits(cfg.PendingMsgs, cfg.PendingMsgs*4096))
		if err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("nats endpoint %s: %w", op, err)
		}
	}
	n.svc = svc
	return n, nil
}

// Stop unsubscribes the service and waits for the requests it is serving.
func (n *NATS) Stop() error {
	err := n.svc.Stop()
	n.serving.Wait()
	return err
}

// handle hands the request to a goroutine so the subscription keeps
// flowing while actors sync; the in-flight bound turns overload into 503.
func (n *NATS) handle(req micro.Request) {
	select {
	case n.sem <- struct{}{}:
	default:
		n.reply(req, &call{reqID: n.h.requestID()}, result{}, fmt.Errorf("nats door: %w", actors.ErrOverloaded))
		return
	}
	body := append([]byte(nil), req.Data()...)
	n.serving.Add(1)
	go func() {
		defer func() { <-n.sem; n.serving.Done() }()
		c := &call{h: n.h, reqID: n.h.requestID(), path: req.Subject(), body: body, started: n.h.stamp()}
		res, err := n.serve(c, req)
		n.reply(req, c, res, err)
	}()
}

func (n *NATS) serve(c *call, req micro.Request) (result, error) {
	tok := strings.Split(req.Subject(), ".")
	if len(tok) != 5 {
		return result{}, fmt.Errorf("subject %q: want plaudit.v1.<ws>.<agent>.<op>: %w", req.Subject(), ErrRouteNotFound)
	}
	ws, agentRef, op := tok[2], tok[3], tok[4]
	p, err := n.h.tenancy.Authenticate(req.Headers().Get("Authorization"))
	if err != nil {
		return result{}, err
	}
	c.p, c.ws = p, p.Home
	if len(c.body) > n.h.cfg.MaxBody {
		return result{}, ErrBodyTooLarge
	}
	if err := n.h.enterWorkspace(c, ws); err != nil {
		return result{}, err
	}
	if key := req.Headers().Get("Idempotency-Key"); key != "" {
		return n.h.idempotent(c, req.Subject(), key, func() (result, error) { return n.route(c, agentRef, op) })
	}
	return n.route(c, agentRef, op)
}

func (n *NATS) route(c *call, agentRef, op string) (result, error) {
	args, err := topLevelArgs(c.body)
	if err != nil {
		return result{}, err
	}
	c.arg = func(name string) string { return args[name] }
	agent, err := n.h.reg.Agent(c.ws, agentRef)
	if err != nil {
		return result{}, err
	}
	a := agentCall{call: c, h: n.h, agent: agent}
	runArg := func(name string) (string, error) {
		ref := args[name]
		if ref == "" {
			return "", field.Errorf(name, "is required")
		}
		return a.resolveRun(ref)
	}
	switch op {
	case "select":
		return a.createRun()
	case "signal":
		return a.postSignal()
	case "variation":
		if args["variation_id"] == "" {
			return result{}, field.Errorf("variation_id", "is required")
		}
		return a.getVariation(args["variation_id"])
	case "finish":
		runID, err := runArg("run_id")
		if err != nil {
			return result{}, err
		}
		return a.finishRun(runID)
	case "reward":
		runID, err := runArg("run_id")
		if err != nil {
			return result{}, err
		}
		return a.reward(runID)
	case "feedback":
		cmd, err := decodeFeedback(c.body)
		if err != nil {
			return result{}, err
		}
		runID, err := runArg("objectiveId")
		if err != nil {
			return result{}, err
		}
		return n.h.feedbackOn(c, cmd, runID, a.agent.ID)
	}
	return result{}, fmt.Errorf("operation %q: %w", op, ErrRouteNotFound)
}

// reply answers with the body, or with the error headers
// Nats-Service-Error-Code (the HTTP status) and Nats-Service-Error, and the
// error JSON as the body. It publishes to the reply subject itself rather
// than through micro.Request, whose Respond and Error record state that
// micro reads when the handler returns: answering from our goroutine through
// them would race. The price: $SRV.STATS counts no errors of this door, and
// its processing times cover only the hand-off.
func (n *NATS) reply(req micro.Request, c *call, res result, err error) {
	msg := nats.NewMsg(req.Reply())
	if err == nil {
		msg.Data = res.body
	} else {
		f := classify(err)
		if f == internalFailure {
			n.h.cfg.Logger.Error("nats request failed", "request_id", c.reqID, "err", err)
		}
		msg.Header.Set(micro.ErrorCodeHeader, strconv.Itoa(f.status))
		msg.Header.Set(micro.ErrorHeader, err.Error())
		msg.Data = errorBody(f, err.Error(), c.reqID, false)
	}
	if res.reqID != "" {
		msg.Header.Set("X-Request-Id", res.reqID)
	}
	if perr := n.nc.PublishMsg(msg); perr != nil {
		n.h.cfg.Logger.Warn("nats reply not sent", "request_id", c.reqID, "err", perr)
	}
}

// topLevelArgs maps the body's top-level string and number members to
// their text, the NATS door's stand-in for path and query parameters.
func topLevelArgs(raw []byte) (map[string]string, error) {
	args := map[string]string{}
	if len(raw) == 0 {
		return args, nil
	}
	p := parsers.Get()
	defer parsers.Put(p)
	v, err := p.ParseBytes(raw)
	if err != nil {
		return nil, field.Errorf("", "body is not valid JSON: %v", err)
	}
	o, err := v.Object()
	if err != nil {
		return nil, field.Errorf("", "body must be a JSON object")
	}
	o.Visit(func(k []byte, m *fastjson.Value) {
		switch m.Type() {
		case fastjson.TypeString:
			args[string(k)] = string(m.GetStringBytes())
		case fastjson.TypeNumber:
			args[string(k)] = m.String()
		}
	})
	return args, nil
}
