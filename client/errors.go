package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"
)

// ErrUnsupported is returned by an operation the client's door does not
// serve: GET /v1/rewards/{id}, agent creation and Do are HTTP only, and on
// NATS an agent or workspace name that cannot be one subject token (empty,
// a wildcard, or holding '.' or white space) cannot be addressed.
var ErrUnsupported = errors.New("plaudit client: the operation is not served on this door")

// ErrInvalidIdempotencyKey is returned, before anything is sent, for a
// call given an Idempotency-Key holding a control character, which no door
// can carry in a header (net/http refuses it; in a NATS header a newline
// would end the header). Any other key goes to the server, whose 400 names
// the field when it refuses one: 1-200 printable ASCII characters without
// spaces.
var ErrInvalidIdempotencyKey = errors.New("plaudit client: an Idempotency-Key holds a control character")

// sendableKey reports whether key can travel in a header of either door.
func sendableKey(key string) bool {
	for i := range len(key) {
		if key[i] < 0x20 || key[i] == 0x7f {
			return false
		}
	}
	return true
}

// Error is an error answer of either door: the HTTP status (on NATS, the
// Nats-Service-Error-Code header), the body's error code and message, the
// request id and the Retry-After the server asked for.
type Error struct {
	Status int    // HTTP status, e.g. 400, 409, 503
	Code   string // error.code of the JSON doors, e.g. "invalid_request"; empty in the seed-004 shape
	// GRPCCode is google.rpc.Code, set only on answers in the seed-004
	// shape (feedback over HTTP, under /v1/workspaces), which carry no Code.
	GRPCCode int
	Message  string
	// Field is the path of the invalid field of a 400 ("data.score",
	// "definition.terms[1].scale", "Idempotency-Key"), read from the front
	// of Message, where the server names it; empty when it names none.
	Field      string
	RequestID  string        // X-Request-Id of the answer
	RetryAfter time.Duration // the Retry-After header; zero when absent
}

func (e *Error) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.Status)
	}
	return fmt.Sprintf("plaudit: %d %s: %s (request %s)", e.Status, code, e.Message, e.RequestID)
}

// fieldPrefix matches the path a validation message starts with, then
// ": ": dotted names with [i] indexes, keys that are not plain names quoted
// in brackets (metadata.labels["cadenya.com/team"]), and header names.
var fieldPrefix = regexp.MustCompile(`^((?:[A-Za-z_][A-Za-z0-9_-]*|\["(?:[^"\\]|\\.)*"\])(?:\.[A-Za-z0-9_-]+|\[[0-9]+\]|\["(?:[^"\\]|\\.)*"\])*): `)

// decodeError reads an error answer of either shape: {"error": {code,
// message, request_id}} or google.rpc.Status {code, message, details}.
// fallback is the message to use when the body has none (the NATS
// Nats-Service-Error header).
func decodeError(status int, body []byte, requestID string, retryAfter time.Duration, fallback string) *Error {
	e := &Error{Status: status, RequestID: requestID, RetryAfter: retryAfter}
	var wire struct {
		Error *struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			RequestID string `json:"request_id"`
		} `json:"error"`
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &wire) == nil {
		switch {
		case wire.Error != nil:
			e.Code, e.Message = wire.Error.Code, wire.Error.Message
			if e.RequestID == "" {
				e.RequestID = wire.Error.RequestID
			}
		case wire.Code != nil:
			_ = json.Unmarshal(wire.Code, &e.GRPCCode)
			e.Message = wire.Message
		}
	}
	if e.Message == "" {
		e.Message = fallback
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	if status == http.StatusBadRequest {
		if m := fieldPrefix.FindStringSubmatch(e.Message); m != nil {
			e.Field = m[1]
		}
	}
	return e
}

// inProgress tells a 409 idempotency_in_progress, in either shape: the
// first attempt of a call is still being served.
func (e *Error) inProgress() bool {
	return e.Status == http.StatusConflict && (e.Code == "idempotency_in_progress" || (e.Code == "" && e.GRPCCode == 10))
}
