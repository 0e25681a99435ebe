package httpapi

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald"
)

// Query parameters of listings: paging (limit, cursor), time windows, and
// the list answer.

// Paging limits.
const (
	defaultPageLimit = 100
	maxPageLimit     = 1000
	// maxCursorID bounds the id inside a cursor; real ids are 30 bytes.
	maxCursorID = 256
)

// page is a list call's paging input.
type page struct {
	limit int
	// key is the id the page continues from ("" for the first page).
	key string
}

// pageParams reads ?limit= (1..1000, default 100) and ?cursor=. A cursor
// is opaque to clients (base64url of the last id seen); one that does not
// decode to an id with the expected prefix is invalid_cursor.
func pageParams(r *http.Request, idPrefix string) (page, error) {
	q, err := query(r)
	if err != nil {
		return page{}, err
	}
	limit, err := limitParam(q)
	if err != nil {
		return page{}, err
	}
	p := page{limit: limit}
	if c := q.Get("cursor"); c != "" {
		key, ok := decodeCursor(c, idPrefix)
		if !ok {
			return page{}, herald.FieldErrorf(herald.CodeInvalidCursor, "cursor",
				"cursor is not one this API returned; pass next_cursor from the previous page unchanged")
		}
		p.key = key
	}
	return p, nil
}

// limitParam reads ?limit= (1..1000, default 100).
func limitParam(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return defaultPageLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxPageLimit {
		return 0, herald.FieldErrorf(herald.CodeInvalidField, "limit",
			"limit must be an integer from 1 to %d, got %s", maxPageLimit, quote(v))
	}
	return n, nil
}

// query parses r's query string. url.URL.Query drops what it cannot
// parse, which would turn a mangled cursor or filter into "no cursor" or
// "no filter" and silently answer the wrong page.
func query(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, &herald.Error{Code: herald.CodeInvalidField, Message: "malformed query string: " + err.Error(), Err: err}
	}
	return q, nil
}

func encodeCursor(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(id))
}

func decodeCursor(c, idPrefix string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		// Tolerate a client that re-padded the value.
		if b, err = base64.URLEncoding.DecodeString(c); err != nil {
			return "", false
		}
	}
	id := string(b)
	if len(id) <= len(idPrefix) || len(id) > maxCursorID || !strings.HasPrefix(id, idPrefix) {
		return "", false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] >= 0x7f {
			return "", false
		}
	}
	return id, true
}

// nextCursor is the next_cursor of a page: null when there is no further
// page.
func nextCursor(more bool, lastID string) *string {
	if !more || lastID == "" {
		return nil
	}
	c := encodeCursor(lastID)
	return &c
}

// timeParam reads an optional RFC 3339 query parameter.
func timeParam(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, invalid(name, "must be an RFC 3339 time such as 2025-01-02T15:04:05Z")
	}
	return t.UTC(), nil
}

// timeWindow reads ?since= and ?until=; until must be after since.
func timeWindow(q url.Values) (since, until time.Time, err error) {
	if since, err = timeParam(q, "since"); err != nil {
		return
	}
	if until, err = timeParam(q, "until"); err != nil {
		return
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		err = invalid("until", "must be after since")
	}
	return
}

type listJSON[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"next_cursor"`
}
