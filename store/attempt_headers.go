package store

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/heraldhq/herald"
)

// EncodeAttemptHeaders is how both backends store an attempt's request or
// response headers (migration 018): NULL (nil) when not recorded, else a
// JSON object of herald.BoundHeaders(h). The bound and the redaction are
// applied again here, whoever built h, so nothing unbounded or unredacted
// reaches an attempt row; for headers already bounded it changes nothing.
func EncodeAttemptHeaders(h map[string]string) *string {
	if h == nil {
		return nil
	}
	h = herald.BoundHeaders(h)
	size := 2
	for n, v := range h {
		size += len(n) + len(v) + 6
	}
	// By hand, not encoding/json: this runs for every attempt, and
	// json.Marshal of a map cost several times the rest of the encoding.
	// BoundHeaders leaves valid UTF-8 without control characters, so only
	// quotes and backslashes need escaping. Names are not sorted (that was
	// a fifth of the cost): an object's order means nothing, and readers
	// sort for display.
	b := make([]byte, 0, size)
	b = append(b, '{')
	for n, v := range h {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = appendJSONString(b, n)
		b = append(b, ':')
		b = appendJSONString(b, v)
	}
	b = append(b, '}')
	s := string(b)
	return &s
}

// appendJSONString appends s, which holds no control characters, as a
// JSON string.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for {
		i := strings.IndexAny(s, `"\`)
		if i < 0 {
			break
		}
		b = append(b, s[:i]...)
		b = append(b, '\\', s[i])
		s = s[i+1:]
	}
	b = append(b, s...)
	return append(b, '"')
}

// DecodeAttemptHeaders reads what EncodeAttemptHeaders stored: nil for
// NULL (attempts stored before migration 018).
func DecodeAttemptHeaders(s *string) (map[string]string, error) {
	if s == nil {
		return nil, nil
	}
	h := map[string]string{}
	if err := json.Unmarshal([]byte(*s), &h); err != nil {
		return nil, fmt.Errorf("attempt headers: %w", err)
	}
	return h, nil
}
