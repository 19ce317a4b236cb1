package natsdoor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/plaudit/plaudit/transport/api"
	"github.com/plaudit/plaudit/transport/tenancy"
)

// ForwardSubject is the subject, in the service account, on which node
// receives the requests other nodes of its cluster forward to it. No
// tenant account imports it.
func ForwardSubject(node string) string { return "plaudit.cluster.fwd." + node }

// maxForwardedInFlight bounds the forwarded requests a node serves at once;
// beyond it they are answered 503 overloaded, as a full mailbox would be.
const maxForwardedInFlight = 4096

// forwarded is a request on its way to another node: what api.Request
// holds, with the principal the first node authenticated (the cluster's
// nodes trust each other's doors) and the query arguments by name.
type forwarded struct {
	Op             api.Op            `json:"op"`
	KeyID          string            `json:"key_id"`
	ProfileID      string            `json:"profile_id,omitempty"`
	KeyName        string            `json:"key_name,omitempty"`
	Home           string            `json:"home"`
	Admin          bool              `json:"admin,omitempty"`
	Workspace      string            `json:"workspace,omitempty"`
	Target         api.Target        `json:"target"`
	Body           []byte            `json:"body,omitempty"`
	Args           map[string]string `json:"args,omitempty"`
	IdempotencyKey []byte            `json:"idempotency_key,omitempty"`
	Prefer         string            `json:"prefer,omitempty"`
	Deadline       time.Time         `json:"deadline"`
	Door           api.Door          `json:"door"`
	Arrived        time.Time         `json:"arrived"`
	Started        uint64            `json:"started"` // the start-order stamp the first node took
	RequestID      string            `json:"request_id"`
	Errors         api.ErrorShape    `json:"errors"`
}

// forwardedAnswer is the answer that goes back.
type forwardedAnswer struct {
	Status     int    `json:"status"`
	Body       []byte `json:"body"`
	RequestID  string `json:"request_id"`
	RetryAfter int    `json:"retry_after,omitempty"`
	Message    string `json:"message,omitempty"`
	NotServed  bool   `json:"not_served,omitempty"`
}

// Forwarder is a cluster node's api.Router over NATS: it forwards a request
// to the node that owns its agent, on that node's ForwardSubject.
type Forwarder struct {
	nc *nats.Conn
	// Owner is the node serving agentID now (the lease holder of its
	// partition), "" when none does.
	owner func(agentID string) string
	local func(agentID string) bool
	// stale is told when owner's answer did not hold: no owner, or one
	// that is gone or does not serve the agent (the leases' view may lag).
	stale func()
}

// NewForwarder returns a Forwarder sending on nc (Plaudit's own
// connection), with local and owner answering for the cluster's leases,
// and stale told when owner's answer did not hold (nil: nobody).
func NewForwarder(nc *nats.Conn, local func(agentID string) bool, owner func(agentID string) string, stale func()) *Forwarder {
	if stale == nil {
		stale = func() {}
	}
	return &Forwarder{nc: nc, local: local, owner: owner, stale: stale}
}

// Local implements api.Router.
func (f *Forwarder) Local(agentID string) bool { return f.local(agentID) }

// Forward implements api.Router: one request to the owner, waiting until
// the request's deadline.
func (f *Forwarder) Forward(req *api.Request, agentID string) (api.Response, error) {
	node := f.owner(agentID)
	if node == "" {
		f.stale()
		return api.Response{}, api.ErrNoOwner
	}
	fw := forwarded{Op: req.Op, KeyID: req.Principal.KeyID, ProfileID: req.Principal.ProfileID,
		KeyName: req.Principal.Name, Home: req.Principal.Home, Admin: req.Principal.Admin,
		Workspace: req.Workspace, Target: req.Target, Body: req.Body, Args: req.Args(),
		IdempotencyKey: req.IdempotencyKey, Prefer: req.Prefer, Deadline: req.Deadline, Door: req.Door,
		Arrived: req.Arrived, Started: req.Started, RequestID: req.RequestID, Errors: req.Errors}
	data, err := json.Marshal(fw)
	if err != nil {
		return api.Response{}, err
	}
	wait := time.Until(req.Deadline)
	if wait <= 0 {
		wait = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var moved atomic.Bool
	go f.watchOwner(ctx, cancel, &moved, agentID, node)
	msg, err := f.nc.RequestWithContext(ctx, ForwardSubject(node), data)
	if errors.Is(err, nats.ErrNoResponders) {
		// The owner stopped, and its lease has not expired yet (or
		// this node has not seen it go).
		f.stale()
		return api.Response{}, fmt.Errorf("node %s gone: %w", node, api.ErrNoOwner)
	}
	if err != nil && moved.Load() {
		return api.Response{}, fmt.Errorf("node %s lost the agent's partition before it answered; the request's outcome is unknown", node)
	}
	if err != nil {
		return api.Response{}, fmt.Errorf("node %s: %w", node, err)
	}
	var ans forwardedAnswer
	if err := json.Unmarshal(msg.Data, &ans); err != nil {
		return api.Response{}, fmt.Errorf("node %s: answer: %w", node, err)
	}
	if ans.NotServed {
		// Still taking the partition, or it let it go: nothing was done.
		f.stale()
		return api.Response{}, fmt.Errorf("node %s does not serve it: %w", node, api.ErrNoOwner)
	}
	return api.Response{Status: ans.Status, Body: ans.Body, RequestID: ans.RequestID, RetryAfter: ans.RetryAfter,
		Message: ans.Message}, nil
}

// Watching a forwarded request's owner: how often, and how long after the
// owner changed the answer is still awaited (a node handing a partition
// over answers what it holds before its lease goes).
const (
	ownerPoll  = 100 * time.Millisecond
	ownerGrace = 250 * time.Millisecond
)

// watchOwner cancels a request forwarded to node once agentID's partition
// has had another owner, or none, for ownerGrace, setting moved: a node
// that stopped (paused, cut off) would otherwise hold the request until
// its deadline, though its partition has moved on and it can no longer
// write. Whether it wrote before is unknown, so the request is answered
// 503, not sent again.
func (f *Forwarder) watchOwner(ctx context.Context, cancel context.CancelFunc, moved *atomic.Bool, agentID, node string) {
	tick := time.NewTicker(ownerPoll)
	defer tick.Stop()
	var since time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		switch {
		case f.owner(agentID) == node:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= ownerGrace:
			moved.Store(true)
			cancel()
			return
		}
	}
}

// ServeForwarded serves the requests other nodes forward to node on nc
// with svc, until the returned subscription is unsubscribed.
func ServeForwarded(nc *nats.Conn, node string, svc *api.Service, logger *slog.Logger) (*nats.Subscription, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	slots := make(chan struct{}, maxForwardedInFlight)
	return nc.Subscribe(ForwardSubject(node), func(m *nats.Msg) {
		var fw forwarded
		if err := json.Unmarshal(m.Data, &fw); err != nil {
			logger.Warn("unreadable forwarded request", "component", "cluster", "err", err)
			return // the sender times out
		}
		req := &api.Request{Op: fw.Op, Workspace: fw.Workspace, Target: fw.Target, Body: fw.Body,
			IdempotencyKey: fw.IdempotencyKey, Prefer: fw.Prefer, Deadline: fw.Deadline, Door: fw.Door,
			Arrived: fw.Arrived, Started: fw.Started, RequestID: fw.RequestID, Errors: fw.Errors, Forwarded: true,
			Principal: tenancy.Principal{KeyID: fw.KeyID, ProfileID: fw.ProfileID, Name: fw.KeyName,
				Home: fw.Home, Admin: fw.Admin}}
		req.Query = api.ArgsMap(fw.Args)
		select {
		case slots <- struct{}{}:
		default:
			reply(m, svc.Error(req, errOverloaded), logger)
			return
		}
		go func() {
			defer func() { <-slots }()
			reply(m, svc.Handle(req), logger)
		}()
	})
}

// errOverloaded answers a forwarded request beyond maxForwardedInFlight.
var errOverloaded = fmt.Errorf("too many forwarded requests in flight: %w", api.ErrBodyBudget)

func reply(m *nats.Msg, resp api.Response, logger *slog.Logger) {
	data, err := json.Marshal(forwardedAnswer{Status: resp.Status, Body: resp.Body, RequestID: resp.RequestID,
		RetryAfter: resp.RetryAfter, Message: resp.Message, NotServed: resp.NotServed})
	if err == nil {
		err = m.Respond(data)
	}
	if err != nil {
		logger.Warn("answering a forwarded request", "component", "cluster", "err", err)
	}
}

// JudgeSubject is the subject, in the service account, on which node asks
// the judge workers connected to its own embedded server on behalf of the
// other nodes of its cluster: a judge worker may be connected to any node,
// and the embedded server sends a judge request only to its own
// connections (Embedded.JudgeRequest).
func JudgeSubject(node string) string { return "plaudit.cluster.judge." + node }

// relayedJudge is a judge request on its way to another node, and
// relayedVerdict its answer.
type relayedJudge struct {
	Workspace string        `json:"ws"`
	Name      string        `json:"name"`
	Data      []byte        `json:"data"`
	Timeout   time.Duration `json:"timeout"`
}

type relayedVerdict struct {
	Data         []byte `json:"data,omitempty"`
	NoResponders bool   `json:"no_responders,omitempty"`
	Err          string `json:"err,omitempty"`
}

// ServeJudgeRequests asks, for the other nodes of node's cluster, the
// judge workers connected to e, until the returned subscription is
// unsubscribed.
func ServeJudgeRequests(nc *nats.Conn, node string, e *Embedded, logger *slog.Logger) (*nats.Subscription, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return nc.Subscribe(JudgeSubject(node), func(m *nats.Msg) {
		var rq relayedJudge
		if err := json.Unmarshal(m.Data, &rq); err != nil {
			logger.Warn("unreadable relayed judge request", "component", "cluster", "err", err)
			return
		}
		go func() {
			var v relayedVerdict
			msg, err := e.JudgeRequest(nc, rq.Workspace, rq.Name, rq.Data, rq.Timeout)
			switch {
			case errors.Is(err, nats.ErrNoResponders):
				v.NoResponders = true
			case err != nil:
				v.Err = err.Error()
			default:
				v.Data = msg.Data
			}
			data, err := json.Marshal(v)
			if err == nil {
				err = m.Respond(data)
			}
			if err != nil {
				logger.Warn("answering a relayed judge request", "component", "cluster", "err", err)
			}
		}()
	})
}

// RelayJudgeRequest asks node's judge workers of workspace ws serving
// name (see ServeJudgeRequests); nats.ErrNoResponders when it has none.
func RelayJudgeRequest(nc *nats.Conn, node, ws, name string, data []byte, timeout time.Duration) ([]byte, error) {
	req, err := json.Marshal(relayedJudge{Workspace: ws, Name: name, Data: data, Timeout: timeout})
	if err != nil {
		return nil, err
	}
	// A little more than the judge's own timeout, for the relay.
	msg, err := nc.Request(JudgeSubject(node), req, timeout+time.Second)
	if err != nil {
		return nil, fmt.Errorf("judge request relayed to node %s: %w", node, err)
	}
	var v relayedVerdict
	if err := json.Unmarshal(msg.Data, &v); err != nil {
		return nil, fmt.Errorf("judge request relayed to node %s: %w", node, err)
	}
	switch {
	case v.NoResponders:
		return nil, nats.ErrNoResponders
	case v.Err != "":
		return nil, fmt.Errorf("judge request relayed to node %s: %s", node, v.Err)
	}
	return v.Data, nil
}
