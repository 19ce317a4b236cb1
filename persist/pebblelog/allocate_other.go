//go:build !linux

package pebblelog

import "errors"

// allocate is unsupported here; the ballast is written instead.
func allocate(uintptr, int64) error { return errors.ErrUnsupported }
