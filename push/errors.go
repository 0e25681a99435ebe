package push

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Error is an endpoint error as autopush answers it: an HTTP status, an
// errno (autopush's numbering, docs/api.md lists them) and a message. It is
// written as
//
//	{"code":<status>,"errno":<errno>,"error":"<reason phrase>","message":"…","more_info":"…"}
type Error struct {
	Status  int
	Errno   int
	Message string
	// RetryAfter is sent as Retry-After (whole seconds, at least 1) when
	// set; a 503 without it says 120.
	RetryAfter time.Duration
	Err        error // cause, never shown to clients
}

func (e *Error) Error() string {
	return fmt.Sprintf("push %d errno %d: %s", e.Status, e.Errno, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errno values (autopush's).
const (
	ErrnoInvalidToken    = 102 // 404: undecryptable token, bad length, bad version
	ErrnoPayloadTooLarge = 104 // 413
	ErrnoUserDeleted     = 105 // 410: user deleted while routing
	ErrnoNoSubscription  = 106 // 410: unknown uaid or channel not registered
	ErrnoInvalidCrypto   = 110 // 400: bad or missing crypto headers
	ErrnoMissingTTL      = 111 // 400
	ErrnoInvalidTopic    = 113 // 400
	ErrnoInvalidTTL      = 114 // 400: negative or malformed TTL
	ErrnoVAPID           = 109 // 401: any VAPID problem
	ErrnoRetry           = 201 // 503: store unavailable; 429: rate or storage cap; retry later
	ErrnoInternal        = 999 // 500
)

// WriteError writes err as autopush's JSON error body. Errors that are not
// *Error answer 500 errno 999 (their text is not shown). 410 answers carry
// Cache-Control: max-age=86400, 429 and 503 answers Retry-After (503: 120
// unless the error names another), 401 answers WWW-Authenticate: vapid.
func WriteError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusInternalServerError, Errno: ErrnoInternal, Message: "internal error"}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	switch e.Status {
	case http.StatusGone:
		// Senders should drop the subscription; caches may remember that.
		h.Set("Cache-Control", "max-age=86400")
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", "vapid")
	}
	ra := e.RetryAfter
	if ra <= 0 && (e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests) {
		ra = 120 * time.Second
	}
	if ra > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64(max(time.Second, ra.Round(time.Second))/time.Second), 10))
	}
	w.WriteHeader(e.Status)
	body, _ := json.Marshal(&errorBody{
		Code: e.Status, Errno: e.Errno, Error: http.StatusText(e.Status), Message: e.Message, MoreInfo: moreInfo,
	})
	_, _ = w.Write(append(body, '\n'))
}

// moreInfo is where the errno table is documented.
const moreInfo = "https://github.com/heraldhq/herald/blob/main/docs/api.md#web-push-errors"

type errorBody struct {
	Code     int    `json:"code"`
	Errno    int    `json:"errno"`
	Error    string `json:"error"`
	Message  string `json:"message"`
	MoreInfo string `json:"more_info"`
}
