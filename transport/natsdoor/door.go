package natsdoor

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/internal/warm"
	"github.com/plaudit/plaudit/transport/api"
	"github.com/plaudit/plaudit/transport/tenancy"
)

// DefaultMaxBody is Config.MaxBody's default, HTTP's too.
const DefaultMaxBody = 1 << 20

// Config configures the door; zero fields take defaults.
type Config struct {
	// InFlight bounds requests being served at once; past it requests are
	// answered 503 at once rather than queued without limit.
	InFlight int
	// PendingMsgs bounds each endpoint's subscription buffer.
	PendingMsgs int
	// MaxBody bounds a request's body, as httpdoor.Config.MaxBody does: a
	// larger one is 413 body_too_large. Default DefaultMaxBody. The server's
	// max_payload must exceed it by the headers' size for the 413 to be
	// answered rather than refused by the client's library.
	MaxBody int
	// Identity tells which workspace and key sent a request, from what the
	// server set on it: Embedded.Requester when the server's clients
	// authenticate through Embedded. Nil (an external server), every
	// request must carry an Authorization header.
	Identity func(subject string, h map[string][]string) (workspace, keyID string, ok bool)
	Version  string // reported by $SRV.INFO
	Logger   *slog.Logger
}

// Door is the request-reply door: a nats.go micro service named "plaudit"
// with endpoints on plaudit.v1.<ws>.<agent>.<op>. Bodies and replies are the
// HTTP JSON shapes; what HTTP takes from the path or query string travels
// in the body, and the Idempotency-Key and Prefer headers are NATS headers.
// plaudit.v1.<ws>.tasks.reward is seed 003's POST /v1/rewards (see
// judgedRewards).
type Door struct {
	cfg     Config
	nc      *nats.Conn
	svc     *api.Service
	micro   micro.Service
	sem     chan struct{}
	serving sync.WaitGroup
	workers *warm.Pool // serve requests on goroutines with grown stacks
	// maxReply is the largest reply body the connection's server takes
	// (max_payload less replyHeaderRoom): read at Start and again when a
	// reply is refused, not per request, since nats.go reads it under the
	// connection's lock, which every publish takes.
	maxReply atomic.Int64
}

// operation is a NATS operation: the service operation it is, and the body
// member naming its target, if any.
type operation struct {
	op     api.Op
	target string // body member with the run or variation
}

var operations = map[string]operation{
	"select":    {op: api.CreateRun},
	"signal":    {op: api.RecordSignal},
	"finish":    {op: api.FinishRun, target: "run_id"},
	"reward":    {op: api.GetReward, target: "run_id"},
	"feedback":  {op: api.CreateFeedback, target: "objectiveId"},
	"variation": {op: api.GetVariation, target: "variation_id"},
	"report":    {op: api.ReportReward, target: "run_id"},
	"preview":   {op: api.PreviewObjective},
}

// judgedRewards is the agent token of plaudit.v1.<ws>.tasks.reward, seed
// 003's judged rewards (POST /v1/rewards): the subject shares the "reward"
// endpoint (plaudit.v1.*.*.reward) with seed 000's reward of a run, and the
// agent token "tasks" tells them apart. No agent can be named "tasks":
// agent ids are "agt_" + a ULID, and an agent's external id is only ever
// referred to as "external_id:<value>", so the token never names an agent.
const judgedRewards = "tasks"

var judgedReward = operation{op: api.CreateJudgedReward}

// Start registers the service on nc.
func Start(nc *nats.Conn, svc *api.Service, cfg Config) (*Door, error) {
	if cfg.InFlight <= 0 {
		cfg.InFlight = 4096
	}
	if cfg.PendingMsgs <= 0 {
		cfg.PendingMsgs = 65536
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Version == "" {
		cfg.Version = "0.1.0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Door{cfg: cfg, nc: nc, svc: svc, sem: make(chan struct{}, cfg.InFlight), workers: warm.New(8)}
	ms, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     cfg.Version,
		Description: "Plaudit reward engine: select, finish, signal, feedback, reward, variation, report, preview",
	})
	if err != nil {
		d.workers.Close()
		return nil, fmt.Errorf("nats service: %w", err)
	}
	for _, name := range []string{"select", "finish", "signal", "feedback", "reward", "variation", "report", "preview"} {
		err := ms.AddEndpoint(name, micro.HandlerFunc(d.handle),
			micro.WithEndpointSubject("plaudit.v1.*.*."+name),
			micro.WithEndpointPendingLimits(cfg.PendingMsgs, cfg.PendingMsgs*4096))
		if err != nil {
			_ = ms.Stop()
			d.workers.Close()
			return nil, fmt.Errorf("nats endpoint %s: %w", name, err)
		}
	}
	// The endpoints' subscriptions reach the server with the next flush;
	// until then a request finds no responder. The door is open only once
	// the server has them.
	if err := nc.FlushTimeout(10 * time.Second); err != nil {
		_ = ms.Stop()
		d.workers.Close()
		return nil, fmt.Errorf("nats endpoints: %w", err)
	}
	d.micro = ms
	d.readMaxReply()
	return d, nil
}

// readMaxReply reads the connection's max_payload into maxReply.
func (d *Door) readMaxReply() { d.maxReply.Store(max(d.nc.MaxPayload()-replyHeaderRoom, 1)) }

// Stop unsubscribes the service and waits for the requests it is serving.
func (d *Door) Stop() error {
	err := d.micro.Stop()
	d.serving.Wait()
	d.workers.Close()
	return err
}

// handle hands the request to a goroutine so the subscription keeps
// flowing while actors sync; the in-flight bound turns overload into 503.
func (d *Door) handle(m micro.Request) {
	in := &inbound{req: api.Request{RequestID: d.svc.RequestID(), Errors: api.ErrorJSON, Door: api.DoorNATS, Arrived: time.Now()}}
	req := &in.req
	select {
	case d.sem <- struct{}{}:
	default:
		d.reply(m, d.svc.Error(req, fmt.Errorf("nats door: %w", actors.ErrOverloaded)))
		return
	}
	req.Started = d.svc.Stamp()
	// nats.go gives every message a payload of its own, so the body is
	// handed over as it is.
	subject, hdr, body := m.Subject(), m.Headers(), m.Data()
	d.serving.Add(1)
	d.workers.Go(func() {
		defer func() { <-d.sem; d.serving.Done() }()
		if err := d.admit(in, subject, hdr, body); err != nil {
			d.reply(m, d.svc.Error(req, err))
			return
		}
		d.reply(m, d.svc.Handle(req))
	})
}

// inbound is a request as the door admits it, with its query arguments:
// the body's members, read once and only if asked for. One allocation
// holds both.
type inbound struct {
	req    api.Request
	args   map[string]string
	parsed bool
}

// Arg implements api.Arguments, on the request's one goroutine.
func (in *inbound) Arg(name string) string {
	if !in.parsed {
		in.args, _ = api.BodyArgs(in.req.Body) // nil on a fault, which the service reports
		in.parsed = true
	}
	return in.args[name]
}

// subjectTokens splits plaudit.v1.<ws>.<agent>.<op> into its five tokens
// without allocating; false if it has another number of tokens.
func subjectTokens(subject string) (tok [5]string, ok bool) {
	for i := range tok {
		if i == len(tok)-1 {
			tok[i] = subject
			return tok, !strings.Contains(subject, ".")
		}
		var found bool
		tok[i], subject, found = strings.Cut(subject, ".")
		if !found {
			return tok, false
		}
	}
	return tok, false
}

// admit translates a NATS request into req: who sent it, the subject's
// workspace, agent and operation, and the body's targets and arguments.
func (d *Door) admit(in *inbound, subject string, hdr micro.Headers, body []byte) error {
	req := &in.req
	if !d.svc.Ready() {
		return api.ErrRecovering
	}
	tok, ok := subjectTokens(subject)
	if !ok {
		return fmt.Errorf("subject %s: want plaudit.v1.<ws>.<agent>.<op>: %w", field.Quote(subject), api.ErrRouteNotFound)
	}
	p, err := d.principal(subject, hdr)
	if err != nil {
		return err
	}
	req.Principal = p
	if len(body) > d.cfg.MaxBody {
		return fmt.Errorf("%w: the limit is %d bytes", api.ErrBodyTooLarge, d.cfg.MaxBody)
	}
	op, ok := operations[tok[4]]
	if !ok {
		return fmt.Errorf("operation %s: %w", field.Quote(tok[4]), api.ErrRouteNotFound)
	}
	agent := tok[3]
	if agent == judgedRewards && tok[4] == "reward" {
		op, agent = judgedReward, "" // no agent: the same target (and Idempotency-Key scope) as over HTTP
	}
	req.Op, req.Workspace, req.Body = op.op, tok[2], body
	req.Target.Agent = agent
	// What HTTP takes from the path and query string is in the body. It
	// is read here only for an operation whose target is there; for the
	// others (a selection, a signal) the service reads the body anyway, and
	// reports its faults as it does over HTTP, so the query arguments are
	// read from it only if asked for.
	if op.target != "" {
		var err error
		if in.args, err = api.BodyArgs(body, op.target); err != nil {
			return err
		}
		in.parsed = true
		ref := in.args[op.target]
		if ref == "" {
			return field.Errorf(op.target, "is required")
		}
		if op.op == api.GetVariation {
			req.Target.Variation = ref
		} else {
			req.Target.Run = ref
		}
	}
	req.Query = in
	req.MaxReply = int(d.maxReply.Load())
	// Present but empty, the key is the service's 400, as over HTTP.
	if keys, ok := hdr["Idempotency-Key"]; ok {
		req.IdempotencyKey = []byte{}
		if len(keys) > 0 {
			req.IdempotencyKey = append(req.IdempotencyKey, keys[0]...)
		}
	}
	req.Prefer = hdr.Get("Prefer")
	return nil
}

// principal is who sent the request: the key of its connection (from the
// server-set Nats-Request-Info), or the key in its Authorization header,
// which must then belong to the connection's workspace. Without a
// connection identity, the header is required.
func (d *Door) principal(subject string, hdr micro.Headers) (tenancy.Principal, error) {
	ten := d.svc.Tenancy()
	var (
		conn    tenancy.Principal
		hasConn bool
	)
	if d.cfg.Identity != nil {
		if ws, keyID, ok := d.cfg.Identity(subject, hdr); ok {
			p, active := ten.Key(keyID)
			if !active || p.Home != ws {
				return tenancy.Principal{}, fmt.Errorf("connection key %s: %w", keyID, tenancy.ErrUnauthenticated)
			}
			conn, hasConn = p, true
		}
	}
	header := hdr.Get("Authorization")
	if header == "" {
		if !hasConn {
			return tenancy.Principal{}, tenancy.ErrUnauthenticated
		}
		return conn, nil
	}
	p, err := ten.Authenticate(header)
	if err != nil {
		return tenancy.Principal{}, err
	}
	if hasConn && p.Home != conn.Home {
		return tenancy.Principal{}, fmt.Errorf("the Authorization header names a key of another workspace than the connection's: %w", tenancy.ErrForbidden)
	}
	return p, nil
}

// reply answers with the body, or with the error headers
// Nats-Service-Error-Code (the HTTP status) and Nats-Service-Error, and the
// error JSON as the body. Successes carry no status: 200, 201 and 202 are
// all a reply without error headers. A 202 (a judged reward still pending)
// is told by its body ("status": "pending") and its Retry-After: 1 header,
// which a success carries for no other reason. It publishes to the reply subject itself rather
// than through micro.Request, whose Respond and Error record state that
// micro reads when the handler returns: answering from our goroutine through
// them would race. The price: $SRV.STATS counts no errors of this door, and
// its processing times cover only the hand-off.
//
// A reply over the connection's max_payload (a success echoing a large
// variation config: error messages are clipped) is refused by nats.go
// before it leaves; the requester then gets a small 500 instead of a
// timeout, and the log says what was dropped.
func (d *Door) reply(m micro.Request, resp api.Response) {
	err := d.publish(m, resp)
	if errors.Is(err, nats.ErrMaxPayload) { // svc.Error logs the 500
		d.readMaxReply() // a server of a smaller max_payload, reconnected to
		req := &api.Request{RequestID: resp.RequestID, Errors: api.ErrorJSON}
		err = d.publish(m, d.svc.Error(req, fmt.Errorf("%w: a %d reply of %d bytes, the connection's max_payload is %d",
			ErrReplyTooLarge, resp.Status, len(resp.Body), d.nc.MaxPayload())))
	}
	if err != nil {
		d.cfg.Logger.Warn("nats reply not sent", "request_id", resp.RequestID, "err", err)
	}
}

// ErrReplyTooLarge is the 500 answered in place of a reply NATS cannot carry
// that the service let through (its headers over replyHeaderRoom).
var ErrReplyTooLarge = errors.New("the reply is larger than NATS can carry")

// replyHeaderRoom is what a reply leaves of max_payload for its headers:
// the request id, Retry-After, and an error's code and message (at most
// 1 KiB). The service answers a body that would not fit 500 itself
// (api.Request.MaxReply), so the metrics and the access log count the
// answer sent.
const replyHeaderRoom = 2 << 10

func (d *Door) publish(m micro.Request, resp api.Response) error {
	msg := nats.NewMsg(m.Reply())
	msg.Data = resp.Body
	if resp.Status >= 400 {
		msg.Header.Set(micro.ErrorCodeHeader, strconv.Itoa(resp.Status))
		msg.Header.Set(micro.ErrorHeader, resp.Message)
	}
	if resp.RequestID != "" {
		msg.Header.Set("X-Request-Id", resp.RequestID)
	}
	if resp.RetryAfter > 0 {
		msg.Header.Set("Retry-After", strconv.Itoa(resp.RetryAfter))
	}
	return d.nc.PublishMsg(msg)
}
