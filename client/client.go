package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Client calls Plaudit through one door, HTTP (NewHTTP) or NATS (NewNATS,
// DialNATS). Its methods are safe for concurrent use.
type Client struct {
	door door
	opts options
}

// door is one transport: it sends one attempt of a call and returns the
// answer, or the error that kept it from arriving.
type door interface {
	serves(c *call) bool
	send(ctx context.Context, c *call, body []byte, key string) (answer, error)
	close() error
}

// answer is one attempt's reply. NATS carries no success status: its
// successes are 200.
type answer struct {
	status     int
	body       []byte
	requestID  string
	retryAfter time.Duration
	message    string // NATS's Nats-Service-Error header
}

// call is one operation, addressed for both doors.
type call struct {
	method, path string     // HTTP
	query        url.Values // HTTP query arguments
	// op is the NATS operation (select, finish, signal, feedback, reward)
	// and agent the subject's agent token; op "" means HTTP only.
	op, agent string
	members   [][2]string // what HTTP takes from the path or query, as NATS body members
	in        any         // the request body; nil sends none
	write     bool        // takes an Idempotency-Key and is retried under it
	key       string      // the caller's Idempotency-Key
	wait      time.Duration
	out       any // decoded from a success
}

// Option configures a Client.
type Option func(*options)

type options struct {
	workspace      string
	httpClient     *http.Client
	timeout        time.Duration
	attemptTimeout time.Duration
	maxAttempts    int
	backoff        time.Duration
	maxBackoff     time.Duration
	maxWait        time.Duration
	onRetry        func(Retry)
	natsAuth       string
}

func defaults() options {
	return options{
		workspace:      "default",
		timeout:        30 * time.Second,
		attemptTimeout: 10 * time.Second,
		maxAttempts:    8, // the waits add up to about 5 s: a server's restart
		backoff:        50 * time.Millisecond,
		maxBackoff:     2 * time.Second,
		maxWait:        30 * time.Second,
	}
}

// Workspace names the workspace the client acts in (default "default", the
// first workspace). NATS subjects name it, and so do the seed-004 HTTP
// paths (feedback); the other HTTP paths act in the key's home workspace, so
// a key of another workspace must name its own here. Over NATS, a subject
// of a workspace the key may not use is refused by the server's
// permissions, which nats.go reports only to the connection's error
// handler: such a call fails when its Timeout (or context) runs out.
func Workspace(ws string) Option { return func(o *options) { o.workspace = ws } }

// HTTPClient sets the *http.Client of an HTTP client (default: one of its
// own, with the default transport's settings).
func HTTPClient(hc *http.Client) Option { return func(o *options) { o.httpClient = hc } }

// Timeout bounds a call whose context has no deadline, retries included
// (default 30s, plus a judged reward's Wait). A context's deadline always
// wins.
func Timeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// AttemptTimeout bounds one attempt (default 10s, plus a judged reward's
// Wait): an attempt whose answer does not come in time, such as a NATS
// request whose reply was lost in a reconnect, is retried like a transport
// error. The server answers within its request deadline (5s) or with 503.
func AttemptTimeout(d time.Duration) Option { return func(o *options) { o.attemptTimeout = d } }

// MaxAttempts bounds the attempts of one call (default 8, whose waits add
// up to about 5 s, enough to ride out a server's restart; 1 never
// retries).
func MaxAttempts(n int) Option { return func(o *options) { o.maxAttempts = max(n, 1) } }

// Backoff sets the wait before the first retry and its cap: each retry
// waits twice the last, up to max (default 50ms, 2s).
func Backoff(initial, max time.Duration) Option {
	return func(o *options) { o.backoff, o.maxBackoff = initial, max }
}

// MaxWait caps any one wait between attempts, Retry-After included
// (default 30s). A full disk asks for 10s; a shorter cap retries sooner.
func MaxWait(d time.Duration) Option { return func(o *options) { o.maxWait = d } }

// OnRetry is called before each retry, with what failed and how long the
// client will wait (for logs and metrics).
func OnRetry(f func(Retry)) Option { return func(o *options) { o.onRetry = f } }

// Retry describes a retry about to happen.
type Retry struct {
	Attempt        int           // the attempt that failed, from 1
	Err            error         // its error: an *Error (503, 409 in progress) or a transport error
	Wait           time.Duration // before the next attempt
	IdempotencyKey string        // the key every attempt of the call carries; empty for reads
}

// NewKey returns a fresh Idempotency-Key: 26 random base32 characters.
func NewKey() string { return rand.Text() }

// Close releases what the client owns: an HTTP client's idle connections,
// the NATS connection DialNATS made.
func (c *Client) Close() error { return c.door.close() }

// do runs a call: one attempt, then retries while the failure is one a
// retry can cure and the context allows. A write carries one
// Idempotency-Key, the caller's or a generated one, on every attempt, so
// however many attempts reach the server it is written once.
func (c *Client) do(ctx context.Context, cl *call) error {
	if !c.door.serves(cl) {
		return fmt.Errorf("%s: %w", cl.describe(), ErrUnsupported)
	}
	var body []byte
	if cl.in != nil {
		b, err := json.Marshal(cl.in)
		if err != nil {
			return fmt.Errorf("plaudit client: encode request: %w", err)
		}
		body = b
	}
	key := cl.key
	if cl.write && key == "" {
		key = NewKey()
	}
	if !sendableKey(cl.key) {
		// It cannot leave: not a transport error, not to be tried again.
		return fmt.Errorf("%w: %q", ErrInvalidIdempotencyKey, cl.key)
	}
	if _, ok := ctx.Deadline(); !ok && c.opts.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.timeout+cl.wait)
		defer cancel()
	}
	for attempt := 1; ; attempt++ {
		err := c.attempt(ctx, cl, body, key)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		wait, ok := c.retryable(err, attempt, cl.write)
		if !ok {
			return err
		}
		if d, has := ctx.Deadline(); has && time.Until(d) < wait {
			return err // the answer would come too late
		}
		if c.opts.onRetry != nil {
			c.opts.onRetry(Retry{Attempt: attempt, Err: err, Wait: wait, IdempotencyKey: key})
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// attempt sends one attempt and decodes its answer.
func (c *Client) attempt(ctx context.Context, cl *call, body []byte, key string) error {
	if c.opts.attemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.attemptTimeout+cl.wait)
		defer cancel()
	}
	a, err := c.door.send(ctx, cl, body, key)
	if err != nil {
		if errors.As(err, new(*Error)) || errors.Is(err, ErrUnsupported) {
			return err // decided before it left: another attempt would fail alike
		}
		return &transportError{op: cl.describe(), err: err}
	}
	if a.status >= 400 {
		return decodeError(a.status, a.body, a.requestID, a.retryAfter, a.message)
	}
	if cl.out == nil {
		return nil
	}
	if err := json.Unmarshal(a.body, cl.out); err != nil {
		return fmt.Errorf("plaudit client: %s: decode answer (request %s): %w", cl.describe(), a.requestID, err)
	}
	if r, ok := cl.out.(interface{ setRequestID(string) }); ok {
		r.setRequestID(a.requestID)
	}
	return nil
}

// retryable says whether err can be cured by another attempt, and after
// how long: a 503 always (nothing was done), a transport error or a 409
// idempotency_in_progress only for reads and keyed writes (an earlier
// attempt may have been done, or still be running, and the key makes a
// repeat a replay).
func (c *Client) retryable(err error, attempt int, write bool) (time.Duration, bool) {
	if attempt >= c.opts.maxAttempts {
		return 0, false
	}
	wait := c.opts.backoff << (attempt - 1)
	if wait > c.opts.maxBackoff || wait <= 0 {
		wait = c.opts.maxBackoff
	}
	var e *Error
	switch {
	case errors.As(err, &e):
		if e.Status != http.StatusServiceUnavailable && !(write && e.inProgress()) {
			return 0, false
		}
		wait = max(wait, e.RetryAfter)
	case errors.As(err, new(*transportError)):
	default:
		return 0, false
	}
	return min(wait, c.opts.maxWait), true
}

// transportError is a failure to get an answer: a refused or broken
// connection, no NATS responder, an attempt that timed out.
type transportError struct {
	op  string
	err error
}

func (e *transportError) Error() string { return "plaudit client: " + e.op + ": " + e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

func (cl *call) describe() string {
	if cl.op != "" {
		return cl.op
	}
	return cl.method + " " + cl.path
}

// withMembers is body with the call's members in front: what HTTP takes
// from the path or query string travels in the NATS body. A write sends it
// over HTTP too (the HTTP routes accept the members): an Idempotency-Key
// covers the body's bytes, so a write retried through the other door must
// send the same ones.
func (cl *call) withMembers(body []byte) []byte {
	if len(cl.members) == 0 {
		return body
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range cl.members {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m[0])
		v, _ := json.Marshal(m[1])
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	rest := bytes.TrimSpace(body)
	if len(rest) < 2 {
		rest = []byte("{}")
	}
	rest = bytes.TrimSpace(rest[1:])
	if rest[0] != '}' {
		b.WriteByte(',')
	}
	b.Write(rest)
	return b.Bytes()
}

// meta carries what every answer has besides its body.
type meta struct {
	// RequestID is the answer's X-Request-Id; a replayed answer carries its
	// first one's.
	RequestID string `json:"-"`
}

func (m *meta) setRequestID(id string) { m.RequestID = id }
