// Package jserr classifies JetStream errors that more than one package
// acts on.
package jserr

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// WrongLastSequence reports whether err is JetStream's refusal of an
// expected last sequence or revision: a compare-and-set that lost. A
// replicated stream reports it under a code of its own (10164, not 10071),
// which the client's sentinel errors do not always match.
func WrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// InFlight reports whether err is a replicated stream's refusal of an
// expected last sequence per subject for want of an answer: its leader
// refuses one (with 10164, no sequence) while another write on the
// subject is in flight, and for a moment after that write is
// acknowledged. A refusal that answers the expectation names the
// subject's last sequence (10071).
func InFlight(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// duplicateInProcess is JetStream's refusal of a message whose id its
// stream's leader is storing at that moment (not yet stored).
const duplicateInProcess = 10158

// InProcess reports whether err is a stream leader's refusal of a message
// whose message id it is storing now: an earlier send of the same message,
// not answered yet. Once stored, the id is answered as a duplicate; if the
// leader changes first, the earlier send is dropped and the id is free.
func InProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == duplicateInProcess
}

// clusterNotAvailable is JetStream's code for "JetStream system temporarily
// unavailable": a stream with no leader, or no meta leader.
const clusterNotAvailable = 10008

// Unavailable reports whether err says JetStream could not answer now but
// may soon: no answer in time, no responder (a stream with no leader
// listens to nothing), or its own word that it is temporarily unavailable.
// A stream whose leader died answers so until its copies elect another.
func Unavailable(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == clusterNotAvailable
}
