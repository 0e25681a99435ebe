package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// /v1/stats reports a tier beyond the configured ones that still holds
// deliveries (the configuration shrank), and what is held rather than due
// (issue 10, items 5 and 6).
func TestStatsRemovedTierAndHeld(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		ctx := t.Context()
		b.createSub(t, obj{})
		ev := b.publish(t, obj{"type": "a"})
		id := b.deliveriesOf(t, ev.ID)[0].ID
		// Fail it up to tier 5 (the API is configured with 4), due now.
		for tier := 0; tier < 5; tier++ {
			now := time.Now().UTC()
			claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
				Tier: tier, Limit: 10, Now: now, LeaseOwner: "test", LeaseUntil: now.Add(time.Minute),
			})
			require.NoError(t, err)
			require.Len(t, claimed, 1)
			require.Equal(t, id, claimed[0].Delivery.ID)
			due := now.Add(-time.Second)
			_, err = s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: now, Outcomes: []store.DeliveryOutcome{{
				DeliveryID: id, LeaseOwner: "test", State: herald.DeliveryPending, Tier: tier + 1, NextAttemptAt: &due,
				Attempt: herald.Attempt{N: tier + 1, At: now, Status: 500, Error: herald.ErrorHTTPStatus, Tier: tier},
			}}})
			require.NoError(t, err)
		}
		// A second one waits in tier 0 for a disabled subscription.
		off := b.createSub(t, obj{})
		b.publish(t, obj{"type": "a"}) // one delivery per subscription
		ok[subscriptionJSON](t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+off.ID, obj{"state": "disabled"}), http.StatusOK)

		st := ok[statsJSON](t, b.do(t, http.MethodGet, "/v1/stats", nil), http.StatusOK)
		require.Len(t, st.Tiers, 6)
		require.Equal(t, tierJSON{Tier: 4, Removed: true}, st.Tiers[4])
		require.Equal(t, 5, st.Tiers[5].Tier)
		require.True(t, st.Tiers[5].Removed)
		require.Empty(t, st.Tiers[5].Delay)
		require.EqualValues(t, 1, st.Tiers[5].Pending)
		require.EqualValues(t, 1, st.Tiers[5].Due)
		require.Equal(t, "24h", st.Tiers[3].Delay)
		require.False(t, st.Tiers[3].Removed)
		require.EqualValues(t, 2, st.Tiers[0].Pending)
		require.EqualValues(t, 1, st.Tiers[0].Due)
		require.EqualValues(t, 1, st.Tiers[0].Held)
	})
}
