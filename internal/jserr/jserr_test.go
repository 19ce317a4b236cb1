package jserr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"no answer in time", fmt.Errorf("open: %w", context.DeadlineExceeded), true},
		{"nats timeout", nats.ErrTimeout, true},
		{"no responders", fmt.Errorf("fence: %w", nats.ErrNoResponders), true},
		{"no stream response", jetstream.ErrNoStreamResponse, true},
		{"temporarily unavailable", &jetstream.APIError{Code: 503, ErrorCode: clusterNotAvailable}, true},
		{"wrong last sequence", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, false},
		{"stream not found", jetstream.ErrStreamNotFound, false},
		{"canceled", context.Canceled, false},
		{"other", errors.New("disk on fire"), false},
		{"none", nil, false},
	} {
		if got := Unavailable(tc.err); got != tc.want {
			t.Errorf("%s: Unavailable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestInProcess(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"its id in process", fmt.Errorf("publish: %w", &jetstream.APIError{Code: 409, ErrorCode: duplicateInProcess}), true},
		{"in a batch, stored", &jetstream.APIError{Code: 400, ErrorCode: 10201}, false},
		{"wrong last sequence", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, false},
		{"none", nil, false},
	} {
		if got := InProcess(tc.err); got != tc.want {
			t.Errorf("%s: InProcess(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
