package herald

import (
	"errors"
	"fmt"
)

// Code is a stable, snake_case error code returned to API clients. The
// httpapi package maps each to one HTTP status.
type Code string

const (
	CodeInvalidJSON      Code = "invalid_json"      // 400: body is not valid JSON
	CodeInvalidField     Code = "invalid_field"     // 400: a field has a bad value
	CodeUnknownField     Code = "unknown_field"     // 400: a field herald does not know
	CodeMissingField     Code = "missing_field"     // 400: a required field is absent
	CodeInvalidCursor    Code = "invalid_cursor"    // 400
	CodeUnauthorized     Code = "unauthorized"      // 401
	CodeForbidden        Code = "forbidden"         // 403: the token lacks the scope or tenant
	CodeNotFound         Code = "not_found"         // 404
	CodeRequestTimeout   Code = "request_timeout"   // 408: the body did not arrive in time
	CodeConflict         Code = "conflict"          // 409
	CodeBodyTooLarge     Code = "body_too_large"    // 413
	CodeInvalidFilter    Code = "invalid_filter"    // 422: filter does not compile
	CodeUnprocessable    Code = "unprocessable"     // 422: well-formed but unacceptable
	CodeInvalidSchema    Code = "invalid_schema"    // 422: an event type's JSON Schema does not compile
	CodeSchemaMismatch   Code = "schema_mismatch"   // 422: a value does not conform to its event type's schema
	CodeStoreUnavailable Code = "store_unavailable" // 503
	CodeInternal         Code = "internal"          // 500
)

// Error is an error meant for API clients: a stable Code, a human message
// and, when one input field is at fault, its JSON path.
type Error struct {
	Code    Code
	Message string
	Field   string
	Err     error // cause, never shown to clients
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Code, e.Message, e.Field)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldErrorf builds an *Error that names the field at fault.
func FieldErrorf(code Code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Sentinels the store and services return; test with errors.Is.
var (
	// ErrNotFound: no row with that id.
	ErrNotFound = &Error{Code: CodeNotFound, Message: "not found"}
	// ErrConflict: the operation does not fit the current state.
	ErrConflict = &Error{Code: CodeConflict, Message: "conflict"}
	// ErrStoreUnavailable: the store did not answer; nothing was changed.
	ErrStoreUnavailable = &Error{Code: CodeStoreUnavailable, Message: "store unavailable"}
)

// Is makes errors.Is(err, ErrNotFound) true for any *Error with the same code
// that wraps no other cause, and for the sentinel itself.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t == e || (t.Code == e.Code && (t == ErrNotFound || t == ErrConflict || t == ErrStoreUnavailable))
}

// ErrorCode returns the Code of err, or CodeInternal when err carries none.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// NotFoundf returns an ErrNotFound-compatible error naming what was missing.
func NotFoundf(format string, args ...any) *Error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

// Conflictf returns an ErrConflict-compatible error.
func Conflictf(format string, args ...any) *Error {
	return &Error{Code: CodeConflict, Message: fmt.Sprintf(format, args...)}
}
