package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

var tenantNow = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

// Fan-out by tenant: a tenant's event reaches that tenant's subscriptions
// and untenanted all-tenants ones; an untenanted event reaches only
// untenanted subscriptions (issue 12).
func TestFanoutTenants(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		mk := func(mod func(*herald.Subscription)) string {
			sub := &herald.Subscription{
				ID: herald.NewID(herald.PrefixSubscription), URL: "https://example.com/hook", Method: "POST",
				EventTypes: []string{"order.*"}, Ordering: herald.OrderingNone, State: herald.SubscriptionEnabled,
				CreatedAt: tenantNow, UpdatedAt: tenantNow,
			}
			mod(sub)
			out, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{Subscription: sub, Secret: "whsec_x", Now: tenantNow})
			require.NoError(t, err)
			return out.ID
		}
		plain := mk(func(*herald.Subscription) {})
		audit := mk(func(s *herald.Subscription) { s.AllTenants = true })
		acme := mk(func(s *herald.Subscription) { s.Tenant = "acme" })
		globex := mk(func(s *herald.Subscription) { s.Tenant = "globex" })

		f := NewFanout(s, nil)
		require.NoError(t, f.Refresh(ctx))
		ev := func(tenant string) *herald.Event {
			e := event("order.created", `{}`)
			e.Tenant = tenant
			return e
		}
		require.ElementsMatch(t, []string{plain, audit}, matchedIDs(f, ev("")))
		require.ElementsMatch(t, []string{acme, audit}, matchedIDs(f, ev("acme")))
		require.ElementsMatch(t, []string{globex, audit}, matchedIDs(f, ev("globex")))
		require.ElementsMatch(t, []string{audit}, matchedIDs(f, ev("initech")))
	})
}
