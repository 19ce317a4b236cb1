package pebblelog

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/plaudit/plaudit/persist"
)

// slogLogger routes Pebble's log into slog. Pebble calls Fatalf when it
// cannot go on (a failed WAL write, for one): the message is logged at
// ERROR and raised as a fatal panic, which the store's commit path turns
// into an error that fences writes (see Store.commit). Fatalf must not
// return: Pebble would carry on as if the write had succeeded.
type slogLogger struct{ l *slog.Logger }

// fatal is the panic value of slogLogger.Fatalf.
type fatal struct{ msg string }

func (f fatal) String() string { return f.msg }

func (s slogLogger) Infof(format string, args ...any) {
	s.l.Info(fmt.Sprintf(format, args...), "component", "pebble")
}

func (s slogLogger) Errorf(format string, args ...any) {
	s.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (s slogLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.l.Error(msg, "component", "pebble", "fatal", true)
	panic(fatal{msg: msg})
}

// eventListener logs the Pebble events an operator must see. Corruption is
// reported once per file at ERROR; the reads that meet it get an error
// value naming the file (see storageError), never a panic.
func eventListener(l *slog.Logger) *pebble.EventListener {
	var reported sync.Map // path → struct{}
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			l.Error("pebble background error", "component", "pebble", "err", err)
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			if _, dup := reported.LoadOrStore(info.Path, struct{}{}); !dup {
				l.Error("on-disk corruption", "component", "pebble", "file", info.Path, "err", info.Details)
			}
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			l.Warn("disk slow", "component", "pebble", "info", info.String())
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			l.Warn("write stall", "component", "pebble", "reason", info.Reason)
		},
		WriteStallEnd: func() {
			l.Info("write stall ended", "component", "pebble")
		},
	}
}

// CorruptionError is on-disk corruption Pebble found in one file.
type CorruptionError struct{ File string }

func (e *CorruptionError) Error() string {
	return "pebble: on-disk corruption in " + e.File
}

// Unwrap makes the error match persist.ErrCorrupt.
func (e *CorruptionError) Unwrap() error { return persist.ErrCorrupt }

// storageError turns Pebble's corruption errors (multi-line, with stack
// traces) into a *CorruptionError naming the file; other errors pass.
func storageError(err error) error {
	if err == nil {
		return nil
	}
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil {
		return &CorruptionError{File: filepath.Base(info.Path)}
	}
	if pebble.IsCorruptionError(err) {
		return &CorruptionError{File: "an unknown file"}
	}
	return err
}
