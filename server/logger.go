package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// ErrLogFormat is a --log-format that is neither text nor json.
var ErrLogFormat = errors.New("log format: want text or json")

// NewLogger returns the logger `plaudit serve` logs with: format "text"
// (logfmt-like key=value, the default when empty) or "json" (one object a
// line), at level "debug", "info" (the default when empty), "warn" or
// "error", written to w.
func NewLogger(format, level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if level != "" {
		if err := l.UnmarshalText([]byte(level)); err != nil {
			return nil, fmt.Errorf("log level %q: %w", level, err)
		}
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("%q: %w", format, ErrLogFormat)
}
