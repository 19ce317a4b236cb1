package transport

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/transport/auth"
)

// HTTPConfig configures the HTTP door; zero fields take defaults.
type HTTPConfig struct {
	MaxBody int // bytes; default 1 MiB
	// IdempotencyTTL is how long Idempotency-Key records are kept (default
	// 24h); SweepInterval is how often expired ones are deleted (default 10m).
	IdempotencyTTL time.Duration
	SweepInterval  time.Duration
	Now            func() time.Time
	ReadTimeout    time.Duration
	WriteTimeout   time.Duration
	IdleTimeout    time.Duration
	Logger         *slog.Logger
	// Admitted, if set, runs as each request is admitted, right after it is
	// stamped with its start order. Tests use it to hold a request back.
	Admitted func(header func(name string) string)
}

// HTTP is the fasthttp front door.
type HTTP struct {
	cfg     HTTPConfig
	reg     *actors.Registry
	tenancy *auth.Tenancy
	srv     *fasthttp.Server
	ready   atomic.Bool
	idem    idempotency
	stop    chan struct{}

	reqPrefix string
	reqSeq    atomic.Uint64
	lastStamp atomic.Uint64
}

// stamp returns a start-order stamp: Unix nanoseconds, strictly increasing,
// so a request admitted later always carries a larger stamp, across
// restarts too (as long as the clock does not step back).
func (h *HTTP) stamp() uint64 {
	now := uint64(h.cfg.Now().UnixNano())
	for {
		last := h.lastStamp.Load()
		next := max(now, last+1)
		if h.lastStamp.CompareAndSwap(last, next) {
			return next
		}
	}
}

// NewHTTP builds the HTTP door over a registry and a tenancy.
func NewHTTP(cfg HTTPConfig, reg *actors.Registry, tenancy *auth.Tenancy) *HTTP {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 1 << 20
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
	if cfg.IdempotencyTTL <= 0 {
		cfg.IdempotencyTTL = 24 * time.Hour
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = 10 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var p [4]byte
	_, _ = rand.Read(p[:])
	h := &HTTP{cfg: cfg, reg: reg, tenancy: tenancy, reqPrefix: "req_" + hex.EncodeToString(p[:]),
		idem: idempotency{ttl: cfg.IdempotencyTTL, now: cfg.Now}, stop: make(chan struct{})}
	go h.sweepIdempotency(cfg.SweepInterval, h.stop)
	h.srv = &fasthttp.Server{
		Handler:                       h.Handle,
		ErrorHandler:                  h.handleTransportError,
		Name:                          "plaudit",
		ReadTimeout:                   cfg.ReadTimeout,
		WriteTimeout:                  cfg.WriteTimeout,
		IdleTimeout:                   cfg.IdleTimeout,
		MaxRequestBodySize:            cfg.MaxBody,
		DisableHeaderNamesNormalizing: false,
		NoDefaultServerHeader:         false,
		NoDefaultContentType:          true,
		DisablePreParseMultipartForm:  true, // a multipart body is 415 here, not a parse error
		Logger:                        quietLogger{cfg.Logger},
	}
	return h
}

// SetReady marks recovery as done: /healthz answers 200 from now on.
func (h *HTTP) SetReady() { h.ready.Store(true) }

// Serve accepts connections on ln until Shutdown.
func (h *HTTP) Serve(ln net.Listener) error { return h.srv.Serve(ln) }

// Shutdown stops accepting and waits for open requests to finish.
func (h *HTTP) Shutdown() error {
	close(h.stop)
	return h.srv.Shutdown()
}

type quietLogger struct{ l *slog.Logger }

func (q quietLogger) Printf(format string, args ...any) { q.l.Debug(fmt.Sprintf(format, args...)) }

// call is one request on its way through a door.
type call struct {
	h       *HTTP
	ctx     *fasthttp.RequestCtx // nil on the NATS door
	path    string
	arg     func(name string) string // query parameters
	reqID   string
	p       auth.Principal
	ws      string // the workspace the request acts in
	rpc     bool   // answer errors as google.rpc.Status (seed 004)
	body    []byte // the request body, copied out of fasthttp's buffer
	idem    *idem  // set when the request carries an Idempotency-Key
	started uint64 // start order, stamped when the door admits the request
}

// result is what a handler answers on success.
type result struct {
	status int
	body   []byte
	reqID  string // a replayed response's own request id
	// record, when set, is what an Idempotency-Key records instead of body:
	// a response that carries a secret records it without the secret.
	record []byte
}

func ok(b []byte) (result, error)      { return result{status: 200, body: b}, nil }
func created(b []byte) (result, error) { return result{status: 201, body: b}, nil }

func (h *HTTP) requestID() string {
	return h.reqPrefix + "_" + strconv.FormatUint(h.reqSeq.Add(1), 36)
}

// Handle serves one request.
func (h *HTTP) Handle(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	c := &call{h: h, ctx: ctx, path: path, reqID: h.requestID(), started: h.stamp(),
		arg: func(name string) string { return string(ctx.QueryArgs().Peek(name)) }}
	if h.cfg.Admitted != nil {
		h.cfg.Admitted(func(name string) string { return string(ctx.Request.Header.Peek(name)) })
	}
	ctx.Response.Header.Set("X-Request-Id", c.reqID)
	c.rpc = strings.HasPrefix(path, "/v1/workspaces")
	if path == "/healthz" {
		if h.ready.Load() {
			h.write(c, result{status: 200, body: []byte(`{"status":"ok"}`)})
		} else {
			h.write(c, result{status: 503, body: []byte(`{"status":"recovering"}`)})
		}
		return
	}
	res, err := h.serve(c, path)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.write(c, res)
}

func (h *HTTP) serve(c *call, path string) (result, error) {
	if !h.ready.Load() {
		return result{}, fmt.Errorf("recovering: %w", actors.ErrUnavailable)
	}
	p, err := h.tenancy.Authenticate(string(c.ctx.Request.Header.Peek("Authorization")))
	if err != nil {
		return result{}, err
	}
	c.p, c.ws = p, p.Home
	method := string(c.ctx.Method())
	if method == fasthttp.MethodPost || method == fasthttp.MethodPut {
		raw := c.ctx.PostBody()
		if len(raw) > h.cfg.MaxBody {
			return result{}, ErrBodyTooLarge
		}
		if len(raw) > 0 && !isJSON(c.ctx.Request.Header.ContentType()) {
			return result{}, ErrUnsupportedMedia
		}
		c.body = bytes.Clone(raw)
		if key := c.ctx.Request.Header.Peek("Idempotency-Key"); key != nil {
			return h.idempotent(c, method+" "+path, string(key), func() (result, error) {
				return h.route(c, method, splitPath(path))
			})
		}
	}
	return h.route(c, method, splitPath(path))
}

// idempotent serves a call that carries an Idempotency-Key: it replays the
// first response, or runs fn and records its outcome.
func (h *HTTP) idempotent(c *call, scope, key string, fn func() (result, error)) (result, error) {
	rec, err := h.replayOrReserve(c, scope, key)
	if err != nil {
		return result{}, err
	}
	if rec != nil {
		return result{status: rec.status, body: rec.body, reqID: rec.reqID}, nil
	}
	res, err := fn()
	h.finish(c, res, err)
	return res, err
}

func isJSON(ct []byte) bool {
	mt, _, err := mime.ParseMediaType(string(ct))
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

func splitPath(path string) []string {
	path = strings.Trim(path, "/")
	if path == "" {
		return nil
	}
	return strings.Split(path, "/")
}

func (h *HTTP) write(c *call, res result) {
	if res.reqID != "" {
		c.ctx.Response.Header.Set("X-Request-Id", res.reqID)
	}
	c.ctx.SetStatusCode(res.status)
	c.ctx.SetContentType("application/json")
	c.ctx.SetBody(res.body)
}

// fail answers err in the shape of the request's door.
func (h *HTTP) fail(c *call, err error) {
	f := classify(err)
	if f == internalFailure {
		h.cfg.Logger.Error("request failed", "request_id", c.reqID, "err", err)
	}
	if f.status == 503 {
		c.ctx.Response.Header.Set("Retry-After", "1")
	}
	h.write(c, result{status: f.status, body: errorBody(f, err.Error(), c.reqID, c.rpc)})
}

// errorBody renders {"error": {code, message, request_id}} or, on the
// seed-004 door, google.rpc.Status {code, message, details}.
func errorBody(f failure, msg, reqID string, rpc bool) []byte {
	b := make([]byte, 0, 128)
	if rpc {
		b = append(b, '{')
		b = jsonw.Key(b, "code")
		b = jsonw.Int(b, int64(f.grpc))
		b = jsonw.Key(b, "message")
		b = jsonw.String(b, msg)
		b = jsonw.Key(b, "details")
		return append(b, "[]}"...)
	}
	b = append(b, `{"error":{`...)
	b = jsonw.Key(b, "code")
	b = jsonw.String(b, f.code)
	b = jsonw.Key(b, "message")
	b = jsonw.String(b, msg)
	b = jsonw.Key(b, "request_id")
	b = jsonw.String(b, reqID)
	return append(b, "}}"...)
}

// handleTransportError answers requests fasthttp rejects before Handle,
// chiefly bodies over MaxRequestBodySize.
func (h *HTTP) handleTransportError(ctx *fasthttp.RequestCtx, err error) {
	c := &call{ctx: ctx, reqID: h.requestID(), rpc: strings.HasPrefix(string(ctx.Path()), "/v1/workspaces")}
	ctx.Response.Header.Set("X-Request-Id", c.reqID)
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		h.fail(c, fmt.Errorf("%w: the limit is %d bytes", ErrBodyTooLarge, h.cfg.MaxBody))
		return
	}
	h.fail(c, invalid("", "malformed request: %v", err))
}
