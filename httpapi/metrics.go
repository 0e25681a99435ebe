package httpapi

import (
	"crypto/subtle"
	"net/http"

	"github.com/heraldhq/herald"
)

// metricsGate lets a request through to h only with the bearer
// MetricsToken when one is configured (compared in constant time).
func (s *server) metricsGate(h http.Handler) http.Handler {
	want := s.cfg.MetricsToken
	if want == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := bearerToken(r)
		if token == "" {
			s.writeError(w, r, herald.Errorf(herald.CodeUnauthorized,
				"missing metrics token: send the header \"Authorization: Bearer <--metrics-token>\""))
			return
		}
		if subtle.ConstantTimeCompare([]byte(token), []byte(want)) != 1 {
			s.writeError(w, r, herald.Errorf(herald.CodeUnauthorized, "invalid metrics token"))
			return
		}
		h.ServeHTTP(w, r)
	})
}
