package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"
)

// servePprof serves net/http/pprof on addr, which must be a loopback
// address: profiles show request bodies' shapes and the heap, so they are
// never offered beyond the machine. The handlers are on a mux of their own,
// not http.DefaultServeMux, so nothing else Plaudit links can add to them.
// It returns once the listener is open; the server runs until close.
//
// This is for `plaudit bench --cpuprofile/--memprofile` and for engineers
// profiling a server under load (`go tool pprof http://ADDR/debug/pprof/profile`).
// The mutex and block profiles are off, as in any Go program, unless
// mutexFraction and blockRate are set: they cost time on every contended
// lock while on.
func servePprof(addr string, mutexFraction, blockRate int, logger *slog.Logger) (close func() error, err error) {
	if err := loopbackOnly(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof: %w", err)
	}
	if mutexFraction > 0 {
		runtime.SetMutexProfileFraction(mutexFraction)
	}
	if blockRate > 0 {
		runtime.SetBlockProfileRate(blockRate)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("pprof server stopped", "err", err)
		}
	}()
	logger.Info("pprof listening", "addr", ln.Addr().String())
	return srv.Close, nil
}

// loopbackOnly accepts host:port whose host is a loopback IP or
// "localhost"; an empty host (every interface) is refused.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("pprof: %w", err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("pprof: %q is not a loopback address (want 127.0.0.1:PORT, [::1]:PORT or localhost:PORT)", addr)
}
