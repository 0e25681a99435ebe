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

// GET /v1/deliveries/{id} shows the headers each attempt stored
// (request_headers, response_headers), the same to every reader since they
// were redacted when stored; an attempt stored before migration 018 has
// them null and gets its request rebuilt from the subscription, labelled
// rebuilt.
func TestDeliveryAttemptHeaders(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		b.createSub(t, obj{"headers": obj{"X-Tenant": "acme", "Authorization": "Bearer now"}})
		d := b.deliveriesOf(t, b.publish(t, obj{"type": "x.z"}).ID)
		require.Len(t, d, 1)

		// Attempt 1 predates stored headers; attempt 2 has them.
		now := time.Now().UTC().Truncate(time.Millisecond)
		sent := map[string]string{"x-tenant": "then", "authorization": "Bearer then", "webhook-signature": "v1,abc", "herald-attempt": "2"}
		replied := map[string]string{"x-receiver": "yes", "set-cookie": "sid=1"}
		for n, hdr := range []map[string]string{nil, sent} {
			claimed, err := b.store.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{
				Tier: n, Limit: 10, Now: now.Add(time.Hour), LeaseOwner: "test-node", LeaseUntil: now.Add(2 * time.Hour), LeaseMargin: time.Second,
			})
			require.NoError(t, err)
			var outcomes []store.DeliveryOutcome
			for _, c := range claimed {
				o := store.DeliveryOutcome{DeliveryID: c.Delivery.ID, LeaseOwner: "test-node", State: herald.DeliveryDelivered,
					Tier: n, Attempt: herald.Attempt{N: c.Attempt, At: now, Status: 200, Tier: n}}
				if c.Delivery.ID == d[0].ID {
					o.Attempt.Status, o.Attempt.Error = 500, herald.ErrorHTTPStatus
					o.State, o.NextAttemptAt = herald.DeliveryPending, &now
					o.Tier = n + 1
					if hdr != nil {
						o.State, o.NextAttemptAt, o.Tier = herald.DeliveryDead, nil, n
						o.Attempt.RequestHeaders, o.Attempt.ResponseHeaders = hdr, replied
					}
				}
				outcomes = append(outcomes, o)
			}
			_, err = b.store.DeliveryCompleteMany(t.Context(), &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: now})
			require.NoError(t, err)
		}

		readOnly := withToken(b.createToken(t, obj{"name": "viewer", "scopes": []string{"subscriptions:read", "deliveries:read"}}).Token)
		for _, as := range []reqOption{readOnly, withToken(testToken)} {
			got := ok[obj](t, b.do(t, http.MethodGet, "/v1/deliveries/"+d[0].ID, nil, as), http.StatusOK)
			attempts := got["attempts"].([]any)
			require.Len(t, attempts, 2)

			old := attempts[0].(map[string]any)
			require.Contains(t, old, "request_headers")
			require.Nil(t, old["request_headers"], "not recorded")
			require.Nil(t, old["response_headers"])
			rebuilt := old["request"].(map[string]any)
			require.Equal(t, true, rebuilt["rebuilt"])
			require.Equal(t, "acme", rebuilt["headers"].(map[string]any)["x-tenant"], "today's subscription")

			stored := attempts[1].(map[string]any)
			require.NotContains(t, stored, "request", "stored headers replace the rebuild")
			require.Equal(t, map[string]any{
				"x-tenant": "then", "authorization": "***", "webhook-signature": "v1,***", "herald-attempt": "2",
			}, stored["request_headers"], "what was sent then, redacted")
			require.Equal(t, map[string]any{"x-receiver": "yes", "set-cookie": "***"}, stored["response_headers"])
		}
	})
}
