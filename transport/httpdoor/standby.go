package httpdoor

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/plaudit/plaudit/transport/api"
)

// Standby answers every request on a listener 503 until the door takes the
// listener over, so that a server whose door is not up yet (a cluster node
// waiting for its peers, a store opening) says so at once instead of
// leaving clients in the listen backlog. /healthz answers 503
// {"status":"starting"}; any other path the API's 503 unavailable in the
// path's error shape, with Retry-After. It reads no body and forwards
// nothing, so it needs no key. Each answer closes its connection: a
// client's next request reaches the door once it is up.
type Standby struct {
	ln       deadlineListener
	srv      *fasthttp.Server
	ids      *api.RequestIDs
	why      error
	stopping atomic.Bool
	done     chan struct{}
}

// deadlineListener is a listener whose Accept a deadline can wake (a TCP
// listener's): Stop wakes it so, leaving it open for the door.
type deadlineListener interface {
	net.Listener
	SetDeadline(time.Time) error
}

// StartStandby answers on ln until Stop; reason says what the server is
// waiting for, in the answers' message.
func StartStandby(ln net.Listener, reason string, logger *slog.Logger) (*Standby, error) {
	dl, ok := ln.(deadlineListener)
	if !ok {
		return nil, fmt.Errorf("standby: a %T cannot be handed over", ln)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Standby{ln: dl, ids: api.NewRequestIDs(), why: fmt.Errorf("%w: %s", api.ErrStarting, reason),
		done: make(chan struct{})}
	s.srv = &fasthttp.Server{
		Handler:      s.handle,
		ErrorHandler: func(ctx *fasthttp.RequestCtx, _ error) { s.handle(ctx) },
		// The body is never read: fasthttp reads at most a byte of it
		// (0 would mean its default) before the handler runs.
		StreamRequestBody: true,
		HeaderReceived: func(*fasthttp.RequestHeader) fasthttp.RequestConfig {
			return fasthttp.RequestConfig{MaxRequestBodySize: 1}
		},
		Name:                 "plaudit",
		ReadTimeout:          10 * time.Second,
		WriteTimeout:         10 * time.Second,
		ReadBufferSize:       headBuffer,
		NoDefaultContentType: true,
		Logger:               quietLogger{logger},
	}
	go s.serve()
	return s, nil
}

func (s *Standby) serve() {
	defer close(s.done)
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.stopping.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // out of descriptors, say
			continue
		}
		go func() { _ = s.srv.ServeConn(c) }()
	}
}

func (s *Standby) handle(ctx *fasthttp.RequestCtx) {
	ctx.SetConnectionClose()
	path := string(ctx.URI().PathOriginal())
	id := s.ids.Next()
	if path == "/healthz" {
		write(ctx, api.Response{Status: 503, Body: []byte(`{"status":"starting"}`), RequestID: id, RetryAfter: 1})
		return
	}
	write(ctx, api.ErrorResponse(s.why, id, errorShape(path)))
}

// Stop stops accepting and leaves the listener open, its deadline cleared,
// for the door to serve. A connection already accepted is answered.
func (s *Standby) Stop() {
	if s.stopping.Swap(true) {
		return
	}
	_ = s.ln.SetDeadline(time.Now()) // wakes Accept
	<-s.done
	_ = s.ln.SetDeadline(time.Time{})
}
