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

// TestDeliveryWaitingForThrottle: GET /v1/deliveries/{id} says when a due
// delivery waits for its subscription's throttle, and /v1/stats counts
// such deliveries as throttled.
func TestDeliveryWaitingForThrottle(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		b.createSub(t, obj{"rate_limit": obj{"max": 1, "per_seconds": 3600}})
		first := b.publish(t, obj{"type": "doc.updated", "data": obj{}})
		second := b.publish(t, obj{"type": "doc.updated", "data": obj{}})
		d1, d2 := b.deliveriesOf(t, first.ID)[0], b.deliveriesOf(t, second.ID)[0]

		now := time.Now().UTC()
		claimed, err := s.DeliveryClaim(context.Background(), &store.DeliveryClaimParams{
			Tier: 0, Limit: 10, Now: now, LeaseOwner: "test", LeaseUntil: now.Add(time.Minute)})
		require.NoError(t, err)
		require.Len(t, claimed, 1, "the rate limit allows one start an hour")
		waiting := d2
		if claimed[0].Delivery.ID == d2.ID {
			waiting = d1
		}

		got := ok[obj](t, b.do(t, http.MethodGet, "/v1/deliveries/"+waiting.ID, nil), http.StatusOK)
		require.Equal(t, "rate_limit", got["waiting_for"])
		stats := ok[obj](t, b.do(t, http.MethodGet, "/v1/stats", nil), http.StatusOK)
		require.Equal(t, float64(1), stats["throttled"])
	})
}
