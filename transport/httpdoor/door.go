// Package httpdoor is Plaudit's HTTP front door: a fasthttp server that
// translates each request into an api.Request (method and path through the
// route table, headers, query, body) and writes the api.Response back. It
// decides nothing itself but what only HTTP knows: framing, limits, media
// types and /healthz.
package httpdoor

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/transport/api"
)

// Config configures the door; zero fields take defaults.
type Config struct {
	MaxBody      int // bytes; default 1 MiB
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
	Logger       *slog.Logger
}

// Door is the HTTP door over one service.
type Door struct {
	cfg Config
	svc *api.Service
	srv *fasthttp.Server
}

// New returns the door over svc.
func New(cfg Config, svc *api.Service) *Door {
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
	d := &Door{cfg: cfg, svc: svc}
	d.srv = &fasthttp.Server{
		Handler:            d.Handle,
		ErrorHandler:       d.handleTransportError,
		Name:               "plaudit",
		ReadTimeout:        cfg.ReadTimeout,
		WriteTimeout:       cfg.WriteTimeout,
		IdleTimeout:        cfg.IdleTimeout,
		MaxRequestBodySize: cfg.MaxBody,
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

type quietLogger struct{ l *slog.Logger }

func (q quietLogger) Printf(format string, args ...any) { q.l.Debug(fmt.Sprintf(format, args...)) }

// Handle serves one request.
func (d *Door) Handle(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	req := &api.Request{RequestID: d.svc.RequestID(), Started: d.svc.Stamp(), Errors: errorShape(path)}
	if path == "/healthz" {
		ctx.Response.Header.Set("X-Request-Id", req.RequestID)
		write(ctx, d.svc.Health())
		return
	}
	if err := d.admit(ctx, req, path); err != nil {
		write(ctx, d.svc.Error(req, err))
		return
	}
	write(ctx, d.svc.Handle(req))
}

// admit translates the HTTP request into req.
func (d *Door) admit(ctx *fasthttp.RequestCtx, req *api.Request, path string) error {
	if !d.svc.Ready() {
		return api.ErrRecovering
	}
	p, err := d.svc.Tenancy().Authenticate(string(ctx.Request.Header.Peek("Authorization")))
	if err != nil {
		return err
	}
	req.Principal = p
	method := string(ctx.Method())
	if method == fasthttp.MethodPost || method == fasthttp.MethodPut {
		raw := ctx.PostBody()
		if len(raw) > d.cfg.MaxBody {
			return api.ErrBodyTooLarge
		}
		if len(raw) > 0 && !isJSON(ctx.Request.Header.ContentType()) {
			return api.ErrUnsupportedMedia
		}
		// fasthttp reuses its buffers once the handler returns.
		req.Body = bytes.Clone(raw)
		if key := ctx.Request.Header.Peek("Idempotency-Key"); key != nil {
			req.IdempotencyKey = bytes.Clone(key)
		}
	}
	req.Prefer = string(ctx.Request.Header.Peek("Prefer"))
	if err := Route(req, method, path); err != nil {
		return err
	}
	args := ctx.QueryArgs()
	req.Query = func(name string) string { return string(args.Peek(name)) }
	return nil
}

func isJSON(ct []byte) bool {
	mt, _, err := mime.ParseMediaType(string(ct))
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

// handleTransportError answers requests fasthttp rejects before Handle,
// chiefly bodies over MaxRequestBodySize.
func (d *Door) handleTransportError(ctx *fasthttp.RequestCtx, err error) {
	req := &api.Request{RequestID: d.svc.RequestID(), Errors: errorShape(string(ctx.Path()))}
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		write(ctx, d.svc.Error(req, fmt.Errorf("%w: the limit is %d bytes", api.ErrBodyTooLarge, d.cfg.MaxBody)))
		return
	}
	// fasthttp's error quotes the request head, Authorization included:
	// it goes to the debug log, never into the answer.
	d.cfg.Logger.Debug("malformed request", "request_id", req.RequestID, "err", err)
	write(ctx, d.svc.Error(req, field.Errorf("", "malformed request")))
}
