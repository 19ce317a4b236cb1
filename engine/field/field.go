// Package field reports invalid input by the path of the field that is wrong,
// e.g. "definition.terms[1].scale", so every door can name it in a 400.
package field

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("invalid request")

// Error is a validation failure at one field path.
type Error struct {
	Path   string // dotted path with [i] indexes; empty for the whole body
	Reason string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

func (e *Error) Unwrap() error { return ErrInvalid }

// Errorf returns an *Error at path.
func Errorf(path, format string, args ...any) error {
	return &Error{Path: path, Reason: fmt.Sprintf(format, args...)}
}

// Join appends a key to a path: Join("definition", "terms") =
// "definition.terms". A key that is not a plain name (letters, digits, '_'
// and '-') is quoted in brackets, so that the path reads one way:
// Join("labels", "cadenya.com/team") = `labels["cadenya.com/team"]`.
func Join(path, key string) string {
	if !plainKey(key) {
		return path + "[" + Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func plainKey(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Index appends an index to a path: Index("terms", 1) = "terms[1]".
func Index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// Rename moves the path of a field error from the engine's domain names to
// a door's wire names: a path equal to a key of names, or under one (key
// "labels" covers "labels.team"), takes the mapped name. Other errors pass
// unchanged.
func Rename(err error, names map[string]string) error {
	var fe *Error
	if !errors.As(err, &fe) {
		return err
	}
	for from, to := range names {
		if fe.Path == from || strings.HasPrefix(fe.Path, from+".") || strings.HasPrefix(fe.Path, from+"[") {
			return &Error{Path: to + fe.Path[len(from):], Reason: fe.Reason}
		}
	}
	return err
}

// MaxEcho bounds the bytes of a client's value that an error message
// repeats: a message echoing a megabyte of input would not fit a NATS
// reply, and helps no one.
const MaxEcho = 100

// Clip returns s cut to at most n bytes, on a rune boundary, with "…"
// appended when it was cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Quote is strconv.Quote of s clipped to MaxEcho bytes, for error messages
// naming a client's value.
func Quote(s string) string { return strconv.Quote(Clip(s, MaxEcho)) }
