package store

import (
	"encoding/json"
	"fmt"

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
	b, err := json.Marshal(herald.BoundHeaders(h))
	if err != nil {
		// A map of strings always encodes.
		panic(fmt.Sprintf("store: encoding attempt headers: %v", err))
	}
	s := string(b)
	return &s
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
