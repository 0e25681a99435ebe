package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

type tierJSON struct {
	Tier int `json:"tier"`
	// Delay is the tier's maturity delay; absent for a removed tier.
	Delay string `json:"delay,omitempty"`
	// Removed marks a tier no longer configured (--tiers shrank) that
	// still holds deliveries; the next start moves them to the last tier.
	Removed  bool  `json:"removed,omitempty"`
	Pending  int64 `json:"pending"`
	InFlight int64 `json:"in_flight"`
	// Due counts due pending deliveries a claim can take now; Held the
	// other due ones (disabled, deleted or paused subscriptions, or beyond
	// a subscription's rate limit or in-flight cap).
	Due  int64 `json:"due"`
	Held int64 `json:"held"`
	// OldestPendingAgeS is in seconds, with millisecond precision.
	OldestPendingAgeS float64 `json:"oldest_pending_age_s"`
}

type statsJSON struct {
	Tiers          []tierJSON `json:"tiers"`
	Dead           int64      `json:"dead"`
	DeliveredTotal int64      `json:"delivered_total"`
	// Throttled counts due pending deliveries of subscriptions out of
	// budget (rate_limit, max_in_flight, Retry-After pause).
	Throttled int64 `json:"throttled"`
	// Skipped and Superseded count deliveries finished unsent by the
	// "latest" ordering (stale versions; older pending versions).
	Skipped    int64 `json:"skipped"`
	Superseded int64 `json:"superseded"`
}

func (s *server) statsGet(w http.ResponseWriter, r *http.Request) error {
	tiers := s.cfg.Tiers
	if len(tiers) == 0 {
		tiers = []time.Duration{0}
	}
	st, err := s.store.StatsGet(r.Context(), &store.StatsGetParams{Tiers: len(tiers), Now: s.now()})
	if err != nil {
		return err
	}
	out := statsJSON{Tiers: make([]tierJSON, len(tiers)), Dead: st.Dead, DeliveredTotal: st.DeliveredTotal,
		Throttled: st.Throttled, Skipped: st.Skipped, Superseded: st.Superseded}
	for i, d := range tiers {
		out.Tiers[i] = tierJSON{Tier: i, Delay: herald.FormatDelay(d)}
	}
	for _, ts := range st.Tiers {
		if ts.Tier < 0 {
			continue
		}
		// A tier removed from the configuration that still holds work is
		// reported too: hiding it would hide stranded deliveries.
		for len(out.Tiers) <= ts.Tier {
			out.Tiers = append(out.Tiers, tierJSON{Tier: len(out.Tiers), Removed: true})
		}
		t := &out.Tiers[ts.Tier]
		t.Pending, t.InFlight, t.Due, t.Held = ts.Pending, ts.InFlight, ts.Due, ts.Held
		t.OldestPendingAgeS = float64(ts.OldestPendingAge.Milliseconds()) / 1000
	}
	return s.reply(w, http.StatusOK, out)
}

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
