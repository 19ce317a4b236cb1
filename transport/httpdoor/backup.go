package httpdoor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/plaudit/plaudit/transport/api"
	"github.com/plaudit/plaudit/transport/idempotency"
	"github.com/plaudit/plaudit/transport/tenancy"
)

// backupPath is the admin backup route (see Config.Backup).
const backupPath = "/v1/admin/backup"

// serveBackup answers POST /v1/admin/backup: the key is checked (401
// without a valid one, 403 for a key that is not an admin's) before
// anything is done; then Config.Backup makes the copy and its stream is
// the body. The stream can outlast WriteTimeout: each write pushes the
// connection's deadline WriteTimeout on, so a backup ends only when its
// reader stops reading for that long.
func (d *Door) serveBackup(ctx *fasthttp.RequestCtx, req *api.Request) {
	stream, err := d.startBackup(ctx, req)
	if err != nil {
		if errors.Is(err, api.ErrMethodNotAllowed) {
			ctx.Response.Header.Set("Allow", fasthttp.MethodPost)
		}
		write(ctx, d.svc.Error(req, err))
		return
	}
	ctx.Response.Header.Set("X-Request-Id", req.RequestID)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/x-tar")
	conn, timeout, logger := ctx.Conn(), d.cfg.WriteTimeout, d.cfg.Logger
	_ = ctx.SetWriteDeadline(time.Now().Add(timeout)) // and fasthttp leaves the deadline to us
	// fasthttp runs the writer in a goroutine of its own, always, even
	// when the connection is gone: stream is called exactly once.
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		err := stream(&deadlineWriter{w: w, conn: conn, timeout: timeout})
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			logger.Warn("backup not sent", "request_id", req.RequestID, "err", err)
		}
	})
}

func (d *Door) startBackup(ctx *fasthttp.RequestCtx, req *api.Request) (func(io.Writer) error, error) {
	if !d.svc.Ready() {
		return nil, api.ErrRecovering
	}
	p, err := d.svc.Tenancy().AuthenticateHeader(ctx.Request.Header.Peek("Authorization"))
	if err != nil {
		return nil, err
	}
	if !p.Admin {
		return nil, fmt.Errorf("backup: key %s is not an admin key: %w", p.KeyID, tenancy.ErrForbidden)
	}
	if !ctx.IsPost() {
		return nil, fmt.Errorf("%s %s: %w", ctx.Method(), backupPath, api.ErrMethodNotAllowed)
	}
	if key := ctx.Request.Header.Peek("Idempotency-Key"); key != nil {
		// Checked as on every POST; a backup writes nothing, and a retry
		// takes a backup again.
		if err := idempotency.CheckKey(string(key)); err != nil {
			return nil, err
		}
	}
	return d.cfg.Backup()
}

// deadlineWriter moves the connection's write deadline on before each
// write of the stream.
type deadlineWriter struct {
	w       io.Writer
	conn    net.Conn
	timeout time.Duration
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	_ = d.conn.SetWriteDeadline(time.Now().Add(d.timeout))
	return d.w.Write(p)
}
