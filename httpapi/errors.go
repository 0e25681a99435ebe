package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/heraldhq/herald"
)

// codeMethodNotAllowed answers a known /v1/ path called with the wrong
// method. The root package has no Code for it because only the HTTP layer
// can produce it.
const codeMethodNotAllowed herald.Code = "method_not_allowed"

// codeStatus is THE table from error code to HTTP status. A code missing
// here is answered as 500, so adding a Code to the root package means adding
// it here too.
var codeStatus = map[herald.Code]int{
	herald.CodeInvalidJSON:      http.StatusBadRequest,
	herald.CodeInvalidField:     http.StatusBadRequest,
	herald.CodeUnknownField:     http.StatusBadRequest,
	herald.CodeMissingField:     http.StatusBadRequest,
	herald.CodeInvalidCursor:    http.StatusBadRequest,
	herald.CodeUnauthorized:     http.StatusUnauthorized,
	herald.CodeForbidden:        http.StatusForbidden,
	herald.CodeNotFound:         http.StatusNotFound,
	codeMethodNotAllowed:        http.StatusMethodNotAllowed,
	herald.CodeRequestTimeout:   http.StatusRequestTimeout,
	herald.CodeConflict:         http.StatusConflict,
	herald.CodeBodyTooLarge:     http.StatusRequestEntityTooLarge,
	herald.CodeInvalidFilter:    http.StatusUnprocessableEntity,
	herald.CodeUnprocessable:    http.StatusUnprocessableEntity,
	herald.CodeInvalidSchema:    http.StatusUnprocessableEntity,
	herald.CodeSchemaMismatch:   http.StatusUnprocessableEntity,
	herald.CodeStoreUnavailable: http.StatusServiceUnavailable,
	herald.CodeInternal:         http.StatusInternalServerError,
}

// Messages for 5xx answers. The cause is logged, never shown: it may hold
// SQL, addresses or other internals.
const (
	msgStoreUnavailable = "the store is unavailable; nothing was changed, retry later"
	msgInternal         = "internal error"
)

// errorBody is the body of every non-2xx answer under /v1/.
type errorBody struct {
	Error errorJSON `json:"error"`
}

type errorJSON struct {
	Code    herald.Code `json:"code"`
	Message string      `json:"message"`
	Field   string      `json:"field,omitempty"`
}

// errorOf returns the client-facing code, message and field of err and its
// HTTP status. Errors that carry no *herald.Error are internal.
func errorOf(err error) (errorJSON, int) {
	var he *herald.Error
	if !errors.As(err, &he) {
		return errorJSON{Code: herald.CodeInternal, Message: msgInternal}, http.StatusInternalServerError
	}
	status, ok := codeStatus[he.Code]
	switch {
	case !ok:
		return errorJSON{Code: herald.CodeInternal, Message: msgInternal}, http.StatusInternalServerError
	case status == http.StatusServiceUnavailable:
		return errorJSON{Code: he.Code, Message: msgStoreUnavailable}, status
	case status >= 500:
		return errorJSON{Code: herald.CodeInternal, Message: msgInternal}, http.StatusInternalServerError
	}
	return errorJSON{Code: he.Code, Message: he.Message, Field: he.Field}, status
}

// writeError answers err. It is the one place an error is logged: 5xx
// answers with their cause, 4xx not at all (they are the client's business
// and would let any client flood the log).
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	body, status := errorOf(err)
	switch {
	case status == http.StatusServiceUnavailable:
		s.logger.Warn("store unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
	case status >= 500:
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			// The client went away; nothing went wrong on our side.
			s.logger.Debug("request cancelled by the client", "method", r.Method, "path", r.URL.Path)
		} else {
			s.logger.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		}
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="herald"`)
	}
	writeJSON(w, status, errorBody{Error: body}, s.logger)
}

// ErrorCodes lists every code the API answers with (the keys of the error
// table), sorted, so the OpenAPI document's enum can be checked against it.
func ErrorCodes() []string {
	codes := make([]string, 0, len(codeStatus))
	for c := range codeStatus {
		codes = append(codes, string(c))
	}
	slices.Sort(codes)
	return codes
}

// notFound turns a store ErrNotFound into a message naming what was missing;
// other errors pass through.
func notFound(err error, kind, id string) error {
	if errors.Is(err, herald.ErrNotFound) {
		return &herald.Error{Code: herald.CodeNotFound, Message: kind + " " + quote(id) + " not found", Err: err}
	}
	return err
}

// quote renders an id for a message, shortened so a huge path value cannot
// bloat the answer.
func quote(s string) string {
	const max = 300
	if len(s) > max {
		s = s[:max] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}
