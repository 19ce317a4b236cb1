package api

import (
	"errors"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/transport/idempotency"
	"github.com/plaudit/plaudit/transport/judging"
	"github.com/plaudit/plaudit/transport/tenancy"
)

// Errors a door raises before the service, answered through Error.
var (
	ErrBodyTooLarge     = errors.New("request body too large")
	ErrUnsupportedMedia = errors.New("Content-Type must be application/json")
	ErrMethodNotAllowed = errors.New("method not allowed")
	ErrRouteNotFound    = errors.New("no such route")
	ErrRecovering       = errors.New("the server is still recovering")
	ErrStarting         = errors.New("the server is starting")
	// ErrBodyBudget: the bodies a door is reading already fill its budget.
	ErrBodyBudget = errors.New("too many request bodies in flight")
	// ErrReplyTooLarge: an answer larger than its door's transport carries
	// (Request.MaxReply), answered 500 internal in its place.
	ErrReplyTooLarge = errors.New("the answer is larger than the door can carry")
)

var errNotFound = engine.ErrNotFound

// failure is how every door reports one kind of error.
type failure struct {
	status int    // HTTP status, also the NATS Nats-Service-Error-Code
	code   string // error.code on the JSON doors
	grpc   int    // google.rpc.Code on the seed-004 door
}

// failures maps sentinel errors to their answer; the first match wins. It
// is the one table of every door.
var failures = []struct {
	err error
	failure
}{
	{field.ErrInvalid, failure{400, "invalid_request", 3}},
	{tenancy.ErrUnauthenticated, failure{401, "unauthenticated", 16}},
	{tenancy.ErrForbidden, failure{403, "forbidden", 7}},
	{engine.ErrNotFound, failure{404, "not_found", 5}},
	{ErrRouteNotFound, failure{404, "not_found", 5}},
	{ErrMethodNotAllowed, failure{405, "method_not_allowed", 12}},
	{engine.ErrConflict, failure{409, "conflict", 6}},
	{engine.ErrSuperseded, failure{409, "reward_superseded", 10}},
	{idempotency.ErrKeyReused, failure{409, "idempotency_key_reused", 6}},
	{idempotency.ErrInProgress, failure{409, "idempotency_in_progress", 10}},
	{ErrBodyTooLarge, failure{413, "body_too_large", 8}},
	{judging.ErrJudgeRequestTooLarge, failure{413, "body_too_large", 8}},
	{ErrUnsupportedMedia, failure{415, "unsupported_media_type", 3}},
	{persist.ErrStorageFull, failure{503, "storage_full", 8}},
	{persist.ErrFailed, failure{503, "storage_failed", 14}},
	{persist.ErrCorrupt, failure{500, "data_corrupt", 15}},
	{actors.ErrOverloaded, failure{503, "overloaded", 8}},
	{actors.ErrExpired, failure{503, "overloaded", 8}},
	{ErrBodyBudget, failure{503, "overloaded", 8}},
	{actors.ErrUnavailable, failure{503, "unavailable", 14}},
	{ErrRecovering, failure{503, "unavailable", 14}},
	{ErrStarting, failure{503, "unavailable", 14}},
	{persist.ErrMoved, failure{503, "unavailable", 14}},
	{persist.ErrUnavailable, failure{503, "unavailable", 14}},
}

var internalFailure = failure{500, "internal", 13}

// storageFullRetry is the Retry-After of a write refused on a full disk, in
// seconds: room returns by an operator's hand, not in a moment.
const storageFullRetry = 10

func classify(err error) failure {
	for _, f := range failures {
		if errors.Is(err, f.err) {
			return f.failure
		}
	}
	return internalFailure
}

// maxMessage bounds an error message. Messages quote what a client sent
// (field.Quote clips each value), but a path or reference can still be a
// client's megabyte: repeated in the body and, on NATS, in a header, it
// would make an answer no transport carries.
const maxMessage = 1024

// ErrorResponse renders err in shape. A door answers through Service.Error,
// which also logs; this is for an answer given before there is a service
// (see httpdoor.Standby).
func ErrorResponse(err error, reqID string, shape ErrorShape) Response {
	f := classify(err)
	msg := field.Clip(err.Error(), maxMessage)
	resp := Response{Status: f.status, Body: errorBody(f, msg, reqID, shape), RequestID: reqID, Message: msg}
	switch {
	case f.code == "storage_full":
		resp.RetryAfter = storageFullRetry
	case f.status == 503, f.code == "idempotency_in_progress":
		// The first request under the key is still running: a retry in
		// a second may find its answer recorded.
		resp.RetryAfter = 1
	}
	return resp
}

// replayed is a recorded answer's body as a request of shape answers it:
// an error recorded in the {"error"} shape is rendered again in the
// seed-004 shape for a request of that shape (the same bytes that request's
// own door answered first). Any other body is answered as it was stored.
func replayed(rec *idempotency.Record, shape ErrorShape) []byte {
	if rec.Status < 400 || shape != ErrorRPC {
		return rec.Body
	}
	v, err := fastjson.ParseBytes(rec.Body)
	if err != nil || v.Get("error") == nil {
		return rec.Body // stored in this shape already (a record of before)
	}
	code, msg := string(v.GetStringBytes("error", "code")), string(v.GetStringBytes("error", "message"))
	f := internalFailure
	for _, kf := range failures {
		if kf.code == code && kf.status == rec.Status {
			f = kf.failure
			break
		}
	}
	return errorBody(f, msg, rec.RequestID, ErrorRPC)
}

// errorMessage reads the message back from an error body of either shape.
func errorMessage(body []byte) string {
	v, err := fastjson.ParseBytes(body)
	if err != nil {
		return ""
	}
	if m := v.GetStringBytes("error", "message"); m != nil {
		return string(m)
	}
	return string(v.GetStringBytes("message"))
}

// errorBody renders {"error": {code, message, request_id}} or, in the
// seed-004 shape, google.rpc.Status {code, message, details}.
func errorBody(f failure, msg, reqID string, shape ErrorShape) []byte {
	b := make([]byte, 0, 128)
	if shape == ErrorRPC {
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

// invalid is a validation error at path.
func invalid(path, format string, args ...any) error {
	return field.Errorf(path, format, args...)
}
