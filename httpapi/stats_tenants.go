package httpapi

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

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
	since, err := timeParam(q, "since")
	if err != nil {
		return err
	}
	if since.IsZero() {
		since = s.now().Add(-defaultStatsWindow)
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
