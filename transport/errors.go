// Package transport holds Plaudit's front doors: the fasthttp server and,
// later, the NATS service. Both map errors through the one table here.
package transport

import (
	"errors"
	"fmt"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/transport/auth"
)

// Errors raised by the doors themselves.
var (
	ErrBodyTooLarge     = errors.New("request body too large")
	ErrUnsupportedMedia = errors.New("Content-Type must be application/json")
	ErrMethodNotAllowed = errors.New("method not allowed")
	ErrRouteNotFound    = errors.New("no such route")
)

// failure is how every door reports one kind of error.
type failure struct {
	status int    // HTTP status, also the NATS Nats-Service-Error-Code
	code   string // error.code on the JSON doors
	grpc   int    // google.rpc.Code on the seed-004 door
}

// failures maps sentinel errors to their answer; the first match wins.
var failures = []struct {
	err error
	failure
}{
	{field.ErrInvalid, failure{400, "invalid_request", 3}},
	{auth.ErrUnauthenticated, failure{401, "unauthenticated", 16}},
	{auth.ErrForbidden, failure{403, "forbidden", 7}},
	{engine.ErrNotFound, failure{404, "not_found", 5}},
	{ErrRouteNotFound, failure{404, "not_found", 5}},
	{ErrMethodNotAllowed, failure{405, "method_not_allowed", 12}},
	{engine.ErrConflict, failure{409, "conflict", 6}},
	{engine.ErrSuperseded, failure{409, "reward_superseded", 10}},
	{ErrIdempotencyKeyReused, failure{409, "idempotency_key_reused", 6}},
	{ErrIdempotencyBusy, failure{409, "idempotency_in_progress", 10}},
	{ErrBodyTooLarge, failure{413, "body_too_large", 8}},
	{ErrUnsupportedMedia, failure{415, "unsupported_media_type", 3}},
	{actors.ErrOverloaded, failure{503, "overloaded", 8}},
	{actors.ErrUnavailable, failure{503, "unavailable", 14}},
}

var internalFailure = failure{500, "internal", 13}

func classify(err error) failure {
	for _, f := range failures {
		if errors.Is(err, f.err) {
			return f.failure
		}
	}
	return internalFailure
}

// invalid wraps a validation error that has no field path of its own.
func invalid(path, format string, args ...any) error {
	return field.Errorf(path, format, args...)
}

// notFound is a 404 naming what was missing.
func notFound(what, ref string) error {
	return fmt.Errorf("%s %s: %w", what, ref, engine.ErrNotFound)
}
