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
	MaxBody      int // bytes; default 1 MiB
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
	Logger       *slog.Logger
}

// HTTP is the fasthttp front door.
type HTTP struct {
	cfg     HTTPConfig
	reg     *actors.Registry
	tenancy *auth.Tenancy
	srv     *fasthttp.Server
	ready   atomic.Bool

	reqPrefix string
	reqSeq    atomic.Uint64
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
	var p [4]byte
	_, _ = rand.Read(p[:])
	h := &HTTP{cfg: cfg, reg: reg, tenancy: tenancy, reqPrefix: "req_" + hex.EncodeToString(p[:])}
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
		Logger:                        quietLogger{cfg.Logger},
	}
	return h
}

// SetReady marks recovery as done: /healthz answers 200 from now on.
func (h *HTTP) SetReady() { h.ready.Store(true) }

// Serve accepts connections on ln until Shutdown.
func (h *HTTP) Serve(ln net.Listener) error { return h.srv.Serve(ln) }

// Shutdown stops accepting and waits for open requests to finish.
func (h *HTTP) Shutdown() error { return h.srv.Shutdown() }

type quietLogger struct{ l *slog.Logger }

func (q quietLogger) Printf(format string, args ...any) { q.l.Debug(fmt.Sprintf(format, args...)) }

// call is one request on its way through a door.
type call struct {
	ctx   *fasthttp.RequestCtx // nil on the NATS door
	path  string
	arg   func(name string) string // query parameters
	reqID string
	p     auth.Principal
	ws    string // the workspace the request acts in
	rpc   bool   // answer errors as google.rpc.Status (seed 004)
	body  []byte // the request body, copied out of fasthttp's buffer
}

// result is what a handler answers on success.
type result struct {
	status int
	body   []byte
}

func ok(b []byte) (result, error)      { return result{200, b}, nil }
func created(b []byte) (result, error) { return result{201, b}, nil }

func (h *HTTP) requestID() string {
	return h.reqPrefix + "_" + strconv.FormatUint(h.reqSeq.Add(1), 36)
}

// Handle serves one request.
func (h *HTTP) Handle(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	c := &call{ctx: ctx, path: path, reqID: h.requestID(),
		arg: func(name string) string { return string(ctx.QueryArgs().Peek(name)) }}
	ctx.Response.Header.Set("X-Request-Id", c.reqID)
	c.rpc = strings.HasPrefix(path, "/v1/workspaces")
	if path == "/healthz" {
		if h.ready.Load() {
			h.write(c, result{200, []byte(`{"status":"ok"}`)})
		} else {
			h.write(c, result{503, []byte(`{"status":"recovering"}`)})
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
	}
	return h.route(c, method, splitPath(path))
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
	h.write(c, result{f.status, errorBody(f, err.Error(), c.reqID, c.rpc)})
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
