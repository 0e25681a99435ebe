package client

import (
	"errors"
	"fmt"
	"net/url"
)

// APIError is an error answer from the API: its HTTP status and the error
// body's code, message and field (a JSON path such as rate_limit.max, empty
// when the error is not about one field).
type APIError struct {
	Status  int
	Code    string
	Message string
	Field   string
}

// Error renders "code: message", the form the CLI prints.
func (e *APIError) Error() string {
	return e.Code + ": " + e.Message
}

// Is makes errors.Is(err, client.ErrNotFound) true for any not_found
// answer: two APIErrors match when their codes do.
func (e *APIError) Is(target error) bool {
	t, ok := target.(*APIError)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is, one per error code callers usually branch on.
// Only Code is compared.
var (
	ErrNotFound     = &APIError{Code: "not_found", Message: "not found"}
	ErrUnauthorized = &APIError{Code: "unauthorized", Message: "unauthorized"}
	ErrForbidden    = &APIError{Code: "forbidden", Message: "forbidden"}
	ErrConflict     = &APIError{Code: "conflict", Message: "conflict"}
	ErrInvalidField = &APIError{Code: "invalid_field", Message: "invalid field"}
	ErrUnavailable  = &APIError{Code: "store_unavailable", Message: "store unavailable"}
)

// ConnError means no HTTP answer arrived: the server is down, unreachable,
// or the connection broke. Err is the transport's error.
type ConnError struct {
	URL string
	Err error
}

func (e *ConnError) Error() string {
	// url.Error repeats method and URL; show the root cause once.
	err := e.Err
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Sprintf("cannot connect to %s: %v", e.URL, err)
}

func (e *ConnError) Unwrap() error { return e.Err }
