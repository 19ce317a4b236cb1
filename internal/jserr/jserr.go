// Package jserr classifies JetStream errors that more than one package
// acts on.
package jserr

import (
	"errors"

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
