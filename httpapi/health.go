package httpapi

import (
	"context"
	"net/http"

	"github.com/heraldhq/herald"
)

// The open probes: GET /healthz and GET /readyz.

type statusJSON struct {
	Status string `json:"status"`
}

// healthz answers 200 while the process serves HTTP; it reads nothing, so
// a database outage does not get the process restarted.
func (s *server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, statusJSON{Status: "ok"}, s.logger)
}

// readyz answers 200 when the store answers a ping within readyTimeout,
// else 503 store_unavailable, so a load balancer stops sending traffic to a
// node that could not commit it.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		s.writeError(w, r, &herald.Error{Code: herald.CodeStoreUnavailable, Message: "store unavailable", Err: err})
		return
	}
	writeJSON(w, http.StatusOK, statusJSON{Status: "ok"}, s.logger)
}
