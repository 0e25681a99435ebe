package httpapi

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Statistics under /v1/stats: queue-wide, per subscription, per tenant, and
// this node's recent history.

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

// defaultStatsWindow is the window of GET /v1/stats/subscriptions without
// ?since=.
const defaultStatsWindow = 24 * time.Hour

type subscriptionStatsJSON struct {
	SubscriptionID string   `json:"subscription_id"`
	Delivered      int      `json:"delivered"`
	Dead           int      `json:"dead"`
	Pending        int      `json:"pending"`
	InFlight       int      `json:"in_flight"`
	SuccessRate    *float64 `json:"success_rate"`
}

// statsSince reads a stats route's `since` (default: defaultStatsWindow
// ago).
func (s *server) statsSince(q url.Values) (time.Time, error) {
	since, err := timeParam(q, "since")
	if err != nil || !since.IsZero() {
		return since, err
	}
	return s.now().Add(-defaultStatsWindow), nil
}

// subscriptionStats answers GET /v1/stats/subscriptions.
func (s *server) subscriptionStats(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	since, err := s.statsSince(q)
	if err != nil {
		return err
	}
	tenant, err := tenantFilter(r, q)
	if err != nil {
		return err
	}
	stats, err := s.store.SubscriptionStatsList(r.Context(), &store.SubscriptionStatsListParams{Since: since, Tenant: tenant})
	if err != nil {
		return err
	}
	out := struct {
		Since string                  `json:"since"`
		Data  []subscriptionStatsJSON `json:"data"`
	}{Since: timestamp(since), Data: make([]subscriptionStatsJSON, len(stats))}
	for i, st := range stats {
		v := subscriptionStatsJSON{SubscriptionID: st.SubscriptionID, Delivered: st.Delivered, Dead: st.Dead,
			Pending: st.Pending, InFlight: st.InFlight}
		if n := st.Delivered + st.Dead; n > 0 {
			rate := float64(st.Delivered) / float64(n)
			v.SuccessRate = &rate
		}
		out.Data[i] = v
	}
	return s.reply(w, http.StatusOK, out)
}

// History is this node's recent publish and delivery counts, for the
// dashboard's charts; cmd/herald adapts metrics.History to it.
type History interface {
	// Interval is the length of one point.
	Interval() time.Duration
	// Started is when the history began; points before it are unknown.
	Started() time.Time
	// Points returns the points, oldest first.
	Points() []HistoryPoint
}

// HistoryPoint is one interval of History (fields as metrics.HistoryPoint).
type HistoryPoint struct {
	// At is the start of the interval.
	At                                 time.Time
	Published, Delivered, Failed, Dead int
	// LatencyP50 and LatencyP99 estimate publish→delivery latency of the
	// deliveries that succeeded in the interval; nil when none did.
	LatencyP50, LatencyP99 *time.Duration
}

// noHistoryInterval is the interval_s a node without a History answers:
// the dashboard's own default (ui/static/overview.js).
const noHistoryInterval = 10 * time.Second

type historyPointJSON struct {
	At           string   `json:"at"`
	Published    int      `json:"published"`
	Delivered    int      `json:"delivered"`
	Failed       int      `json:"failed"`
	Dead         int      `json:"dead"`
	LatencyP50MS *float64 `json:"latency_p50_ms"`
	LatencyP99MS *float64 `json:"latency_p99_ms"`
}

// statsHistory answers GET /v1/stats/history: this node's last hour. A node
// built without a history answers an empty list.
func (s *server) statsHistory(w http.ResponseWriter, _ *http.Request) error {
	out := struct {
		IntervalS int                `json:"interval_s"`
		StartedAt string             `json:"started_at,omitempty"`
		Points    []historyPointJSON `json:"points"`
	}{IntervalS: int(noHistoryInterval / time.Second), Points: []historyPointJSON{}}
	if s.cfg.History != nil {
		out.IntervalS = int(s.cfg.History.Interval() / time.Second)
		out.StartedAt = timestamp(s.cfg.History.Started())
		msPtr := func(d *time.Duration) *float64 {
			if d == nil {
				return nil
			}
			v := float64(*d) / float64(time.Millisecond)
			return &v
		}
		for _, p := range s.cfg.History.Points() {
			out.Points = append(out.Points, historyPointJSON{At: timestamp(p.At), Published: p.Published,
				Delivered: p.Delivered, Failed: p.Failed, Dead: p.Dead,
				LatencyP50MS: msPtr(p.LatencyP50), LatencyP99MS: msPtr(p.LatencyP99)})
		}
	}
	return s.reply(w, http.StatusOK, out)
}

// Limits of GET /v1/stats/tenants.
const (
	// defaultTenantStats is how many tenants are listed by default; the
	// rest are summed into "other", so the answer stays small however many
	// tenants there are.
	defaultTenantStats = 20
	// maxTenantStats caps ?limit=.
	maxTenantStats = 1000
)

type tenantStatsJSON struct {
	// Tenant is null for untenanted subscriptions.
	Tenant        *string  `json:"tenant"`
	Subscriptions int      `json:"subscriptions"`
	Delivered     int      `json:"delivered"`
	Dead          int      `json:"dead"`
	Pending       int      `json:"pending"`
	InFlight      int      `json:"in_flight"`
	SuccessRate   *float64 `json:"success_rate"`
}

func (t *tenantStatsJSON) add(st *store.SubscriptionStats) {
	t.Delivered += st.Delivered
	t.Dead += st.Dead
	t.Pending += st.Pending
	t.InFlight += st.InFlight
}

func (t *tenantStatsJSON) rate() {
	if n := t.Delivered + t.Dead; n > 0 {
		r := float64(t.Delivered) / float64(n)
		t.SuccessRate = &r
	}
}

// tenantStats answers GET /v1/stats/tenants (admin): the outcomes since
// `since` and the queue now, summed per tenant from the per-subscription
// counts. The `limit` tenants with the most work queued (then the most
// dead) are listed; the others are summed in `other`, so the answer, like
// the /metrics labels (--metrics-tenants), stays bounded.
func (s *server) tenantStats(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	since, err := s.statsSince(q)
	if err != nil {
		return err
	}
	limit := defaultTenantStats
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxTenantStats {
			return herald.FieldErrorf(herald.CodeInvalidField, "limit",
				"limit must be an integer from 1 to %d, got %s", maxTenantStats, quote(v))
		}
	}
	subs, err := s.store.SubscriptionListAll(r.Context())
	if err != nil {
		return err
	}
	stats, err := s.store.SubscriptionStatsList(r.Context(), &store.SubscriptionStatsListParams{Since: since})
	if err != nil {
		return err
	}
	// Every live subscription counts toward its tenant, with or without
	// deliveries; a deleted one's counts stay out (its tenant is no longer
	// known here, and its queued deliveries are never sent).
	tenantOf := make(map[string]string, len(subs.Subscriptions))
	byTenant := map[string]*tenantStatsJSON{}
	get := func(tenant string) *tenantStatsJSON {
		t := byTenant[tenant]
		if t == nil {
			t = &tenantStatsJSON{}
			if tenant != "" {
				t.Tenant = &tenant
			}
			byTenant[tenant] = t
		}
		return t
	}
	for _, sub := range subs.Subscriptions {
		tenantOf[sub.ID] = sub.Tenant
		get(sub.Tenant).Subscriptions++
	}
	for _, st := range stats {
		if tenant, ok := tenantOf[st.SubscriptionID]; ok {
			get(tenant).add(st)
		}
	}
	all := make([]*tenantStatsJSON, 0, len(byTenant))
	for _, t := range byTenant {
		t.rate()
		all = append(all, t)
	}
	slices.SortFunc(all, func(a, b *tenantStatsJSON) int {
		if c := cmp.Compare(b.Pending+b.InFlight, a.Pending+a.InFlight); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Dead, a.Dead); c != 0 {
			return c
		}
		// Untenanted (null) first, then by name: a stable order.
		return cmp.Compare(tenantName(a), tenantName(b))
	})
	out := struct {
		Since string             `json:"since"`
		Data  []*tenantStatsJSON `json:"data"`
		Other *tenantStatsJSON   `json:"other"`
	}{Since: timestamp(since), Data: all[:min(limit, len(all))]}
	if len(all) > limit {
		other := &tenantStatsJSON{}
		for _, t := range all[limit:] {
			other.Subscriptions += t.Subscriptions
			other.Delivered += t.Delivered
			other.Dead += t.Dead
			other.Pending += t.Pending
			other.InFlight += t.InFlight
		}
		other.rate()
		out.Other = other
	}
	return s.reply(w, http.StatusOK, out)
}

func tenantName(t *tenantStatsJSON) string {
	if t.Tenant == nil {
		return ""
	}
	return "\x01" + *t.Tenant
}
