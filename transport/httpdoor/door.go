// Package httpdoor is Plaudit's HTTP front door: a fasthttp server that
// translates each request into an api.Request (method and path through the
// route table, headers, query, body) and writes the api.Response back. It
// decides nothing itself but what only HTTP knows: framing, limits, media
// types, the Allow header of a 405, /healthz and the OpenAPI document
// (/openapi.json).
package httpdoor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/transport/api"
)

// Config configures the door; zero fields take defaults.
type Config struct {
	MaxBody int // bytes; default 1 MiB
	// BodyBudget bounds the bytes of request bodies being read at once,
	// across all connections: default 64 MiB, never less than MaxBody. A
	// body that does not fit is refused unread, 503 with Retry-After.
	BodyBudget int
	// BodyTimeout is how long a request's body may take to arrive once its
	// headers have (default 10 s).
	BodyTimeout time.Duration
	// ReadTimeout is how long a new connection may take to send its first
	// request's headers, and any request its headers from their first
	// byte (default 30 s).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response (default 130 s).
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request (default 2 min).
	IdleTimeout time.Duration
	Logger      *slog.Logger
	// Metrics serves GET /metrics (Prometheus text), unauthenticated like
	// /healthz; nil leaves the path a 404.
	Metrics http.Handler
	// Backup serves POST /v1/admin/backup to admin keys (see serveBackup):
	// called once the key is checked, it makes the copy and returns the
	// func that writes it as the body (called exactly once), or the error
	// to answer instead. nil leaves the path a 404.
	Backup func() (stream func(w io.Writer) error, err error)
	// UI serves the web console: every path under /ui/ (and /ui and /,
	// redirected to /ui/). It authenticates its own requests (a session,
	// not an Authorization header) and calls the service itself; the door
	// only hands it the request. nil leaves those paths to the API (404).
	UI http.Handler
}

// uiPrefix is where Config.UI is served.
const uiPrefix = "/ui/"

// Door is the HTTP door over one service.
type Door struct {
	cfg     Config
	svc     *api.Service
	srv     *fasthttp.Server
	budget  *budget
	metrics fasthttp.RequestHandler // nil without Config.Metrics
	ui      fasthttp.RequestHandler // nil without Config.UI
}

// New returns the door over svc.
func New(cfg Config, svc *api.Service) *Door {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 1 << 20
	}
	if cfg.BodyBudget <= 0 {
		cfg.BodyBudget = 64 << 20
	}
	cfg.BodyBudget = max(cfg.BodyBudget, cfg.MaxBody)
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 10 * time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 130 * time.Second // Prefer: wait=120 plus margin
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Door{cfg: cfg, svc: svc, budget: newBudget(cfg.BodyBudget)}
	if cfg.Metrics != nil {
		d.metrics = fasthttpadaptor.NewFastHTTPHandler(cfg.Metrics)
	}
	if cfg.UI != nil {
		d.ui = fasthttpadaptor.NewFastHTTPHandler(cfg.UI)
	}
	d.srv = &fasthttp.Server{
		Handler:            d.Handle,
		ErrorHandler:       d.handleTransportError,
		HeaderReceived:     d.headerReceived,
		ExpectHandler:      d.expect,
		StreamRequestBody:  true, // see body.go
		Name:               "plaudit",
		ReadTimeout:        cfg.ReadTimeout,
		WriteTimeout:       cfg.WriteTimeout,
		IdleTimeout:        cfg.IdleTimeout,
		MaxRequestBodySize: cfg.MaxBody,
		ReadBufferSize:     headBuffer,
		// Besides keeping no buffers for idle connections, this makes
		// fasthttp close a new connection that sends nothing within
		// ReadTimeout without a word (acquireByteReader treats that read's
		// error as EOF); otherwise the ErrorHandler would answer it a 400 it
		// never asked for. A keep-alive connection idle past IdleTimeout is
		// closed silently either way.
		ReduceMemoryUsage:            true,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true, // a multipart body is 415 here, not a parse error
		Logger:                       quietLogger{cfg.Logger},
	}
	return d
}

// Serve accepts connections on ln until Shutdown.
func (d *Door) Serve(ln net.Listener) error { return d.srv.Serve(ln) }

// Shutdown stops accepting and waits for open requests to finish.
func (d *Door) Shutdown() error { return d.srv.Shutdown() }

// headBuffer bounds a request's line and headers (fasthttp's default): a
// longer head is 400, naming the bound.
const headBuffer = 4096

type quietLogger struct{ l *slog.Logger }

func (q quietLogger) Printf(format string, args ...any) {
	q.l.Debug(redactHead(fmt.Sprintf(format, args...)))
}

// credentialHeader matches the value of a header that carries a secret, as
// fasthttp quotes a request head in its errors (a "\r\n" may be written
// out as the two characters of each escape).
var credentialHeader = regexp.MustCompile(`(?i)((?:authorization|proxy-authorization|cookie|idempotency-key):[ \t]*)(?:[^\r\n\\]|\\[^rn])*`)

// redactHead blanks the credentials in a quoted request head: the API key
// in Authorization, the console's session cookie.
func redactHead(s string) string { return credentialHeader.ReplaceAllString(s, "${1}[REDACTED]") }

// Handle serves one request.
func (d *Door) Handle(ctx *fasthttp.RequestCtx) {
	// The path as sent: routes split it at its slashes before decoding
	// each segment, so an id holding an encoded '/' (external_id:a%2Fb)
	// stays one segment, and "..", "//" or "%2F" never turn one route into
	// another as fasthttp's normalised Path would.
	path := string(ctx.URI().PathOriginal())
	req := &api.Request{RequestID: d.svc.RequestID(), Started: d.admitted(ctx), Errors: errorShape(path),
		Door: api.DoorHTTP, Arrived: time.Now()}
	// Every answer carries it, the console's and /metrics' too.
	ctx.Response.Header.Set("X-Request-Id", req.RequestID)
	if serve := d.own(ctx, path); serve != nil {
		serve(ctx, req)
		return
	}
	if err := d.admit(ctx, req, path); err != nil {
		if errors.Is(err, api.ErrMethodNotAllowed) {
			ctx.Response.Header.Set("Allow", strings.Join(methods(path), ", "))
		}
		write(ctx, d.svc.Error(req, err))
		if req.Body == nil {
			d.answerThenDrain(ctx) // refused with its body unread
		}
		return
	}
	write(ctx, d.svc.Handle(req))
}

// own returns the handler of a request the door serves itself, with no
// key checked first (health, metrics, the OpenAPI document, the backup,
// which checks its own, and the console, which signs in with a cookie),
// or nil for an API request. Handle and expect both ask it.
func (d *Door) own(ctx *fasthttp.RequestCtx, path string) func(*fasthttp.RequestCtx, *api.Request) {
	switch {
	case path == "/healthz":
		return d.serveHealth
	case path == "/metrics" && d.metrics != nil:
		return d.serveMetrics
	case path == backupPath && d.cfg.Backup != nil:
		return d.serveBackup
	case path == "/openapi.json":
		return d.serveOpenAPI
	case d.ui != nil && strings.HasPrefix(path, uiPrefix):
		return d.serveUI
	case d.ui != nil && (path == "/" || path == "/ui") && (ctx.IsGet() || ctx.IsHead()):
		return redirectToUI
	}
	return nil
}

func (d *Door) serveHealth(ctx *fasthttp.RequestCtx, _ *api.Request) { write(ctx, d.svc.Health()) }

func (d *Door) serveMetrics(ctx *fasthttp.RequestCtx, req *api.Request) {
	if !ctx.IsGet() {
		ctx.Response.Header.Set("Allow", fasthttp.MethodGet)
		write(ctx, d.svc.Error(req, fmt.Errorf("%s /metrics: %w", ctx.Method(), api.ErrMethodNotAllowed)))
		return
	}
	if d.bufferBody(ctx, req) {
		d.metrics(ctx)
	}
}

func (d *Door) serveUI(ctx *fasthttp.RequestCtx, req *api.Request) {
	if d.bufferBody(ctx, req) {
		d.ui(ctx)
	}
}

// redirectToUI sends / and /ui to the console. Relative: fasthttp's
// Redirect writes an absolute URL built from the Host header, which a
// cache could keep for someone else.
func redirectToUI(ctx *fasthttp.RequestCtx, _ *api.Request) {
	ctx.Response.Header.Set("Location", uiPrefix)
	ctx.SetStatusCode(fasthttp.StatusFound)
}

// serveOpenAPI answers GET /openapi.json with the door's OpenAPI document,
// without a key, like /healthz: it describes the API and holds no
// workspace's data.
func (d *Door) serveOpenAPI(ctx *fasthttp.RequestCtx, req *api.Request) {
	if !ctx.IsGet() {
		ctx.Response.Header.Set("Allow", fasthttp.MethodGet)
		write(ctx, d.svc.Error(req, fmt.Errorf("%s /openapi.json: %w", ctx.Method(), api.ErrMethodNotAllowed)))
		return
	}
	write(ctx, api.Response{Status: 200, Body: openAPI, RequestID: req.RequestID})
}

// admit translates the HTTP request into req.
func (d *Door) admit(ctx *fasthttp.RequestCtx, req *api.Request, path string) error {
	if !d.svc.Ready() {
		return api.ErrRecovering
	}
	p, err := d.svc.Tenancy().AuthenticateHeader(ctx.Request.Header.Peek("Authorization"))
	if err != nil {
		return err
	}
	req.Principal = p
	method := methodName(ctx.Method())
	// Routed before its body is read: an unknown path is 404 and another
	// method 405, whatever the body.
	if err := Route(req, method, path); err != nil {
		return err
	}
	if method == fasthttp.MethodPost || method == fasthttp.MethodPut {
		if req.Body, err = d.readBody(ctx); err != nil {
			return err
		}
		// fasthttp reuses its buffers once the handler returns.
		if key := ctx.Request.Header.Peek("Idempotency-Key"); key != nil {
			req.IdempotencyKey = bytes.Clone(key)
		}
	}
	req.Prefer = string(ctx.Request.Header.Peek("Prefer"))
	req.Query = (*queryArgs)(ctx.QueryArgs())
	return nil
}

// queryArgs are the query string's arguments as api.Arguments, valid while
// the handler runs (fasthttp reuses them after).
type queryArgs fasthttp.Args

// Arg is name's value. A name given more than once reads as its values
// joined with ',': labels=a=1&labels=b=2 as labels=a=1,b=2, and a
// repeated single value (limit=1&limit=2) fails its parse rather than one
// of them being picked.
func (a *queryArgs) Arg(name string) string {
	var all []byte
	for k, v := range (*fasthttp.Args)(a).All() {
		if string(k) == name {
			if all != nil {
				all = append(all, ',')
			}
			all = append(all, v...)
		}
	}
	return string(all)
}

// methodName is m as a string, the routes' methods without a copy.
func methodName(m []byte) string {
	switch string(m) {
	case fasthttp.MethodGet:
		return fasthttp.MethodGet
	case fasthttp.MethodPost:
		return fasthttp.MethodPost
	case fasthttp.MethodPut:
		return fasthttp.MethodPut
	case fasthttp.MethodPatch:
		return fasthttp.MethodPatch
	case fasthttp.MethodDelete:
		return fasthttp.MethodDelete
	}
	return string(m)
}

func isJSON(ct []byte) bool {
	if string(ct) == "application/json" { // what nearly every client sends: no parse
		return true
	}
	mt, params, err := mime.ParseMediaType(string(ct))
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return false // JSON is UTF-8 (RFC 8259)
	}
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

func write(ctx *fasthttp.RequestCtx, resp api.Response) {
	if resp.RequestID != "" {
		ctx.Response.Header.Set("X-Request-Id", resp.RequestID)
	}
	if resp.RetryAfter > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(resp.RetryAfter))
	}
	ctx.SetStatusCode(resp.Status)
	ctx.SetContentType("application/json")
	ctx.SetBody(resp.Body)
}

// handleTransportError answers requests fasthttp rejects before Handle:
// malformed heads, and requests whose head or first body bytes did not
// arrive in time. (Bodies over the limit are Handle's: fasthttp streams
// them.)
func (d *Door) handleTransportError(ctx *fasthttp.RequestCtx, err error) {
	req := &api.Request{RequestID: d.svc.RequestID(), Errors: errorShape(string(ctx.Path())), Door: api.DoorHTTP}
	if errors.Is(err, fasthttp.ErrBodyTooLarge) { // not with streamed bodies; kept should that change
		write(ctx, d.svc.Error(req, d.tooLarge()))
		return
	}
	if timedOut(err) {
		write(ctx, d.svc.Error(req, field.Errorf("", "request not received in time")))
		return
	}
	if small := (*fasthttp.ErrSmallBuffer)(nil); errors.As(err, &small) {
		write(ctx, d.svc.Error(req, field.Errorf("", "request line and headers over %d bytes", headBuffer)))
		return
	}
	// fasthttp's error quotes the request head: it goes to the debug log,
	// its credentials blanked, never into the answer.
	d.cfg.Logger.Debug("malformed request", "request_id", req.RequestID, "err", redactHead(err.Error()))
	write(ctx, d.svc.Error(req, field.Errorf("", "malformed request")))
}
