// Package client is Plaudit's Go client: typed calls of the hot
// operations (select, finish, signal, feedback, reward; seed 001's reports
// and seed 003's judged rewards) over either door, HTTP (NewHTTP, net/http)
// or NATS (NewNATS, DialNATS, nats.go).
//
// Both doors answer in the same shapes, and fail with the same *Error:
// status, code, message, field path, request id and Retry-After.
//
// Retries. A write gets one Idempotency-Key per call (the request's, or a
// generated one) and every attempt carries it, so a write that reached the
// server before its answer was lost is replayed, not done again. Writes are
// retried on transport errors, on 503 and on 409 idempotency_in_progress
// (the earlier attempt is still running); reads on transport errors and
// 503. Waits double from 50ms up to 2s, and a Retry-After is honoured up to
// MaxWait; the call gives up at MaxAttempts (8), or when the context's
// deadline would pass before the next attempt, with the last error.
//
// What the NATS door does not serve (reading a judged reward, creating
// agents, Do) returns ErrUnsupported on a NATS client.
package client
