package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/heraldhq/herald"
)

// Rendering a success answer (errors.go renders failures).

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any, logger *slog.Logger) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a programming error (an unencodable type) gets here.
		logger.Error("error encoding response", "err", err)
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Error: errorJSON{Code: herald.CodeInternal, Message: msgInternal}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func (s *server) reply(w http.ResponseWriter, status int, v any) error {
	writeJSON(w, status, v, s.logger)
	return nil
}

// timestamp renders t as RFC 3339 in UTC.
func timestamp(t time.Time) string {
	return t.UTC().Format(time.RFC3339Nano)
}

// noStore marks an answer that holds a secret: no cache may keep it.
func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
}
