package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// TestMigrateEventTenantKey: migration 012 gives the deliveries of a
// version-11 schema their event's tenant, after which the same id can be
// published by another tenant and each tenant reads its own.
func TestMigrateEventTenantKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, schema := openAtVersion(ctx, t, 11)

	ids := seedOld(ctx, t, schema, "k", 2, t0, "sub_k")
	conn := schemaConn(ctx, t, schema)
	_, err := conn.Exec(ctx, "UPDATE events SET tenant = 'acme' WHERE id = 'k-evt-000000'")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "UPDATE subscriptions SET all_tenants = true WHERE id = 'sub_k'")
	require.NoError(t, err)

	require.NoError(t, s.Migrate(ctx))
	g, err := s.DeliveryGet(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, "acme", g.Delivery.EventTenant)
	g, err = s.DeliveryGet(ctx, ids[1])
	require.NoError(t, err)
	require.Empty(t, g.Delivery.EventTenant)

	ev, err := s.EventGet(ctx, &store.EventGetParams{ID: "k-evt-000000", Tenant: "acme"})
	require.NoError(t, err)
	require.Len(t, ev.Deliveries, 1)
	res, err := s.EventInsertMany(ctx, &store.EventInsertManyParams{Now: t0, Events: []store.EventInsert{
		{Event: &herald.Event{ID: "k-evt-000000", Type: "t", Tenant: "globex", CreatedAt: t0}},
	}})
	require.NoError(t, err)
	require.Equal(t, []store.EventInsertResult{{ID: "k-evt-000000"}}, res)

	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Tier: 0, Limit: 10, Now: t0, LeaseOwner: "n", LeaseUntil: t0.Add(60e9)})
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	for _, c := range claimed {
		require.Equal(t, c.Delivery.EventTenant, c.Event.Tenant)
	}
}
