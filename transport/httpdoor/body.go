package httpdoor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/transport/api"
)

// How a request body reaches the service, and what a client that sends it
// slowly can hold:
//
//   - fasthttp streams bodies (Server.StreamRequestBody): before the handler
//     runs it reads at most preRead bytes of one, and the handler reads the
//     rest itself, once the key has been checked. (fasthttp's default reads
//     the whole body first, into a buffer of the declared Content-Length
//     allocated as soon as the headers are in: 2,000 anonymous connections
//     declaring 1 MiB and sending 5 bytes held 2 GB, kept afterwards in
//     fasthttp's pools.)
//   - headerReceived checks the key on the headers alone. Without a valid
//     one fasthttp reads at most 1 byte of the body (0 would mean "the
//     default"), and the handler answers 401 without reading more; fasthttp
//     then discards the rest of a small body (under the deadline below), and
//     a larger one is read and dropped after the answer (answerThenDrain).
//     A body declared over MaxBody is read no further either, key or not:
//     the handler answers 413. A request with "Expect: 100-continue" is
//     refused so before its body is sent (expect).
//   - From its headers on, a body has BodyTimeout to arrive, on a deadline
//     fasthttp sets on the connection.
//   - A body larger than preRead takes its declared size (MaxBody when
//     chunked) from the door's budget before it is read and gives it back
//     once read or failed; one that does not fit is 503 + Retry-After,
//     unread. Taking and giving back both happen in the handler, so no
//     fasthttp path (a client gone mid-body, a deadline) can skip the
//     release.
//   - The buffer a body is read into grows as its bytes arrive and belongs
//     to the request (the service keeps it); none of fasthttp's pooled
//     buffers grows to a body's size. ReduceMemoryUsage also returns a
//     connection's read and write buffers to the pools between requests.
//
// A client without a key that sends no byte of its body at all is answered
// only when BodyTimeout expires, and then 400, not 401: fasthttp waits for
// that 1 byte, and resets the request, headers included, when it fails.

// preRead is how much of a streamed body fasthttp reads before the handler
// runs (readBodyWithStreaming in fasthttp's http.go). A body that small has
// arrived whole by then, so it takes nothing from the budget; what such
// bodies hold is bounded by the number of connections.
const preRead = 8 << 10

// budget is the number of body bytes that may still be read at once.
type budget struct{ free atomic.Int64 }

func newBudget(n int) *budget {
	b := &budget{}
	b.free.Store(int64(n))
	return b
}

// take reserves n bytes, or reports that they are not free.
func (b *budget) take(n int) bool {
	for {
		free := b.free.Load()
		if free < int64(n) {
			return false
		}
		if b.free.CompareAndSwap(free, free-int64(n)) {
			return true
		}
	}
}

func (b *budget) give(n int) { b.free.Add(int64(n)) }

// headerReceived runs once a request's headers are in, before fasthttp
// reads any of its body.
func (d *Door) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	// The request is admitted now, before its body arrives: its start
	// stamp (seed 001's order of reports) is taken here and carried to
	// Handle in a header of the door's own, set over any a client sent.
	var b [20]byte
	h.SetBytesKV(admittedHeader, strconv.AppendUint(b[:0], d.svc.Stamp(), 10))
	n := h.ContentLength()
	if n == 0 || n == -2 { // -2: no body framing, so no body
		return fasthttp.RequestConfig{}
	}
	conf := fasthttp.RequestConfig{ReadTimeout: d.cfg.BodyTimeout}
	if n > d.cfg.MaxBody {
		conf.MaxRequestBodySize = 1 // 413 without waiting for what is never kept
	} else if _, err := d.svc.Tenancy().AuthenticateHeader(h.Peek("Authorization")); err != nil {
		conf.MaxRequestBodySize = 1
	}
	return conf
}

// expect answers a request sent with "Expect: 100-continue" before its body
// is sent: an API request without a valid key (401) or declaring a body
// over MaxBody (413) is refused now, so the client never sends the body
// (answered 100 first, a client sent it, and met a connection reset as
// the door closed with it unread); any other gets 100. The answer is the
// door's usual JSON: fasthttp sends what the response holds, with the
// status returned, and closes the connection.
func (d *Door) expect(ctx *fasthttp.RequestCtx) int {
	path := string(ctx.URI().PathOriginal())
	var err error
	switch {
	case ctx.Request.Header.ContentLength() > d.cfg.MaxBody:
		err = d.tooLarge()
	case d.own(ctx, path) != nil:
		return fasthttp.StatusContinue // its handler decides (the console signs in with a cookie)
	default:
		_, err = d.svc.Tenancy().AuthenticateHeader(ctx.Request.Header.Peek("Authorization"))
	}
	if err == nil {
		return fasthttp.StatusContinue
	}
	req := &api.Request{RequestID: d.svc.RequestID(), Errors: errorShape(path), Door: api.DoorHTTP}
	resp := d.svc.Error(req, err)
	write(ctx, resp)
	return resp.Status
}

// A request refused with its body unread (no key, too large, no route) is
// answered at once (fasthttp has read at most 1 byte of it, see
// headerReceived); then what is left of the body, up to drainMax bytes
// declared, is read from the connection and dropped before it closes.
// Closed with the body unread, the connection's unread bytes were answered
// by the kernel with a reset, and a client that sends its whole body
// before it reads (curl) lost the answer (413 came back as "connection
// reset" one time in three). A longer body, or a chunked one, is not read.
const (
	drainMax  = 8 << 20
	drainTime = 2 * time.Second
)

// answerThenDrain sends the answer ctx holds (with Connection: close) on
// the connection, taken over from fasthttp, then reads and drops what the
// client still sends of the body, for at most drainTime. A body fasthttp
// has read whole already (preRead) needs none of it.
func (d *Door) answerThenDrain(ctx *fasthttp.RequestCtx) {
	if n := ctx.Request.Header.ContentLength(); n <= preRead || n > drainMax {
		return
	}
	answer := new(fasthttp.Response)
	ctx.Response.CopyTo(answer)
	answer.SetConnectionClose()
	writeTimeout := d.cfg.WriteTimeout
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		if writeTimeout > 0 {
			_ = c.SetWriteDeadline(time.Now().Add(writeTimeout))
		}
		bw := bufio.NewWriter(c)
		if answer.Write(bw) != nil || bw.Flush() != nil {
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(drainTime))
		_, _ = io.CopyN(io.Discard, c, drainMax)
	})
}

// admittedHeader carries a request's start stamp from headerReceived to
// Handle.
var admittedHeader = []byte("Plaudit-Admitted-Stamp")

// admitted is the start stamp headerReceived took for the request.
func (d *Door) admitted(ctx *fasthttp.RequestCtx) uint64 {
	v := ctx.Request.Header.PeekBytes(admittedHeader)
	n := uint64(0)
	for _, c := range v {
		if c < '0' || c > '9' || n > (1<<64-1-9)/10 {
			v = nil
			break
		}
		n = n*10 + uint64(c-'0')
	}
	if len(v) == 0 {
		return d.svc.Stamp() // not through fasthttp's server (a test calling Handle)
	}
	return n
}

// readBody reads the body of an authenticated request.
func (d *Door) readBody(ctx *fasthttp.RequestCtx) ([]byte, error) {
	if n := ctx.Request.Header.ContentLength(); n > 0 && n <= d.cfg.MaxBody && !isJSON(ctx.Request.Header.ContentType()) {
		return nil, api.ErrUnsupportedMedia
	}
	body, err := d.readBounded(ctx)
	if err != nil {
		return nil, err
	}
	if len(body) > 0 && !isJSON(ctx.Request.Header.ContentType()) {
		return nil, api.ErrUnsupportedMedia
	}
	return body, nil
}

// bufferBody reads the body of a request for a handler behind
// fasthttpadaptor (the console, /metrics), which would read it whole,
// unbounded, before looking at it: within --max-body and the body budget
// and in --body-timeout, as an API body is, and kept in the request for
// the handler. A request it refuses is answered here (false).
func (d *Door) bufferBody(ctx *fasthttp.RequestCtx, req *api.Request) bool {
	body, err := d.readBounded(ctx)
	if err != nil {
		ctx.SetConnectionClose() // what is left of the body is not read
		write(ctx, d.svc.Error(req, err))
		return false
	}
	if body != nil {
		ctx.Request.SetBodyRaw(body) // closes the stream the body came from
	}
	return true
}

// readBounded reads a request's body within --max-body, taking what a
// large one may grow to from the budget while it is read.
func (d *Door) readBounded(ctx *fasthttp.RequestCtx) ([]byte, error) {
	n := ctx.Request.Header.ContentLength() // -1: chunked
	if n == 0 || n == -2 {
		return nil, nil
	}
	if n > d.cfg.MaxBody {
		return nil, d.tooLarge()
	}
	stream := ctx.RequestBodyStream()
	if stream == nil { // fasthttp read the body itself; its buffer is reused
		return bytes.Clone(ctx.PostBody()), nil
	}
	reserve := n
	if n < 0 {
		reserve = d.cfg.MaxBody // a chunked body may grow to the limit
	}
	if reserve > preRead {
		if !d.budget.take(reserve) {
			return nil, fmt.Errorf("%w (the budget is %d bytes)", api.ErrBodyBudget, d.cfg.BodyBudget)
		}
		defer d.budget.give(reserve)
	}
	limit := n
	if n < 0 {
		limit = d.cfg.MaxBody + 1 // one more byte tells a body over the limit
	}
	body, err := readGrowing(stream, limit)
	if err == nil && len(body) < n {
		err = io.ErrUnexpectedEOF // the client closed its side mid-body
	}
	if err != nil {
		// fasthttp closes the connection after a failed body read; the
		// answer is for a client that is still listening.
		if timedOut(err) {
			return nil, field.Errorf("", "request body not received in time (%v)", d.cfg.BodyTimeout)
		}
		d.cfg.Logger.Debug("malformed request body", "err", err)
		return nil, field.Errorf("", "malformed request body")
	}
	if len(body) > d.cfg.MaxBody {
		return nil, d.tooLarge()
	}
	return body, nil
}

// readGrowing reads r to its end, or to max bytes, into a buffer that grows
// as bytes arrive (doubling from 64 KiB, never past max) rather than one
// allocated at the declared length: a client that declares much and sends
// little holds little.
func readGrowing(r io.Reader, max int) ([]byte, error) {
	b := make([]byte, 0, min(max, 64<<10))
	for len(b) < max {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(len(b), max-len(b)))
		}
		m, err := r.Read(b[len(b):min(cap(b), max)])
		b = b[:len(b)+m]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// timedOut reports whether err is a read deadline's (net.Error's Timeout
// without its deprecated Temporary: fasthttputil's pipes have only that).
func timedOut(err error) bool {
	te, ok := errors.AsType[interface {
		error
		Timeout() bool
	}](err)
	return ok && te.Timeout()
}

func (d *Door) tooLarge() error {
	return fmt.Errorf("%w: the limit is %d bytes", api.ErrBodyTooLarge, d.cfg.MaxBody)
}
