package engine

import (
	"errors"

	"github.com/plaudit/plaudit/engine/field"
)

// Errors returned by the engine; callers match them with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	// ErrInvalid is field.ErrInvalid: validation errors are *field.Error.
	ErrInvalid = field.ErrInvalid
)
