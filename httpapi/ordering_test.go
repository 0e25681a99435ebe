package httpapi

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// TestDeliveryWaitingFor: GET /v1/deliveries/{id} says why a pending
// delivery waits (its key, or maturity), and /v1/stats counts skipped and
// superseded deliveries.
func TestDeliveryWaitingFor(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		sub := b.createSub(t, obj{"ordering": "fifo"})
		first := b.publish(t, obj{"type": "doc.updated", "key": "doc-1", "data": obj{}})
		second := b.publish(t, obj{"type": "doc.updated", "key": "doc-1", "data": obj{}})
		d1, d2 := b.deliveriesOf(t, first.ID)[0], b.deliveriesOf(t, second.ID)[0]
		require.Equal(t, sub.ID, d1.SubscriptionID)

		now := time.Now().UTC()
		claimed, err := s.DeliveryClaim(context.Background(), &store.DeliveryClaimParams{
			Tier: 0, Limit: 10, Now: now, LeaseOwner: "test", LeaseUntil: now.Add(time.Minute)})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		require.Equal(t, d1.ID, claimed[0].Delivery.ID)

		got := ok[obj](t, b.do(t, http.MethodGet, "/v1/deliveries/"+d2.ID, nil), http.StatusOK)
		require.Equal(t, "key", got["waiting_for"])
		got = ok[obj](t, b.do(t, http.MethodGet, "/v1/deliveries/"+d1.ID, nil), http.StatusOK)
		require.Contains(t, got, "waiting_for")
		require.Nil(t, got["waiting_for"], "in flight: not waiting")

		stats := ok[obj](t, b.do(t, http.MethodGet, "/v1/stats", nil), http.StatusOK)
		require.Equal(t, float64(0), stats["skipped"])
		require.Equal(t, float64(0), stats["superseded"])
	})
}
