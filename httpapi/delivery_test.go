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

func TestDeliveries(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		subA := b.createSub(t, obj{})
		subB := b.createSub(t, obj{"event_types": []string{"x.*"}})
		var events []publishJSON
		for i := 0; i < 3; i++ {
			events = append(events, b.publish(t, obj{"type": "x.y", "key": "k", "version": i}))
		}

		// Filters.
		all := ok[listJSON[deliveryJSON]](t, b.do(t, http.MethodGet, "/v1/deliveries", nil), http.StatusOK)
		require.Len(t, all.Data, 6)
		require.Nil(t, all.NextCursor)
		onlyA := ok[listJSON[deliveryJSON]](t, b.do(t, http.MethodGet, "/v1/deliveries?subscription_id="+subA.ID, nil), http.StatusOK)
		require.Len(t, onlyA.Data, 3)
		for _, d := range onlyA.Data {
			require.Equal(t, subA.ID, d.SubscriptionID)
			require.Equal(t, herald.DeliveryPending, d.State)
			require.NotNil(t, d.NextAttemptAt)
			require.Nil(t, d.Attempts, "list pages carry no attempts")
		}
		one := ok[listJSON[deliveryJSON]](t, b.do(t, http.MethodGet,
			"/v1/deliveries?subscription_id="+subB.ID+"&event_id="+events[1].ID+"&state=pending", nil), http.StatusOK)
		require.Len(t, one.Data, 1)
		require.Equal(t, events[1].ID, one.Data[0].EventID)
		none := ok[listJSON[deliveryJSON]](t, b.do(t, http.MethodGet, "/v1/deliveries?state=dead", nil), http.StatusOK)
		require.Empty(t, none.Data)
		require.NotNil(t, none.Data, "an empty page is [] not null")

		// Paging newest first, cursor to cursor, covers everything once.
		seen := map[string]bool{}
		path := "/v1/deliveries?limit=4"
		for pages := 0; ; pages++ {
			require.Less(t, pages, 3)
			page := ok[listJSON[deliveryJSON]](t, b.do(t, http.MethodGet, path, nil), http.StatusOK)
			for _, d := range page.Data {
				require.False(t, seen[d.ID])
				seen[d.ID] = true
			}
			if page.NextCursor == nil {
				break
			}
			path = "/v1/deliveries?limit=4&cursor=" + *page.NextCursor
		}
		require.Len(t, seen, 6)

		// One delivery with its attempts.
		id := onlyA.Data[0].ID
		got := ok[obj](t, b.do(t, http.MethodGet, "/v1/deliveries/"+id, nil), http.StatusOK)
		for _, k := range []string{"id", "event_id", "subscription_id", "state", "tier", "attempts", "next_attempt_at", "created_at", "updated_at"} {
			require.Contains(t, got, k)
		}
		require.Equal(t, []any{}, got["attempts"])

		b.killDeliveries(t, []string{id}, time.Now().UTC())
		dead := ok[obj](t, b.do(t, http.MethodGet, "/v1/deliveries/"+id, nil), http.StatusOK)
		require.Equal(t, "dead", dead["state"])
		require.Nil(t, dead["next_attempt_at"])
		attempts := dead["attempts"].([]any)
		require.Len(t, attempts, 1)
		a := attempts[0].(map[string]any)
		require.Equal(t, float64(1), a["n"])
		require.Equal(t, float64(500), a["status"])
		require.Equal(t, "http_status", a["error"])
		require.Equal(t, "boom", a["response_excerpt"])
		require.Equal(t, float64(12), a["duration_ms"])
		_, err := time.Parse(time.RFC3339Nano, a["at"].(string))
		require.NoError(t, err)

		requireError(t, b.do(t, http.MethodGet, "/v1/deliveries/dlv_nope", nil), http.StatusNotFound, herald.CodeNotFound, "")
		requireError(t, b.do(t, http.MethodGet, "/v1/deliveries?state=lost", nil), http.StatusBadRequest, herald.CodeInvalidField, "state")
		requireError(t, b.do(t, http.MethodGet, "/v1/deliveries?cursor=***", nil), http.StatusBadRequest, herald.CodeInvalidCursor, "cursor")
		requireError(t, b.do(t, http.MethodGet, "/v1/deliveries?cursor=%zz", nil), http.StatusBadRequest, herald.CodeInvalidField, "")
		requireError(t, b.do(t, http.MethodGet, "/v1/deliveries?cursor="+encodeCursor(subA.ID), nil), http.StatusBadRequest, herald.CodeInvalidCursor, "cursor")
	})
}

func TestDeliveryRetry(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		b.createSub(t, obj{})
		ev := b.publish(t, obj{"type": "a"})
		id := b.deliveriesOf(t, ev.ID)[0].ID

		// A pending delivery cannot be retried.
		requireError(t, b.do(t, http.MethodPost, "/v1/deliveries/"+id+"/retry", nil), http.StatusConflict, herald.CodeConflict, "")

		b.killDeliveries(t, []string{id}, time.Now().UTC())
		res := ok[deliveryJSON](t, b.do(t, http.MethodPost, "/v1/deliveries/"+id+"/retry", nil), http.StatusAccepted)
		require.Equal(t, herald.DeliveryPending, res.State)
		require.Equal(t, 0, res.Tier)
		require.NotNil(t, res.NextAttemptAt)
		<-b.notified // the workers were woken

		got := ok[deliveryJSON](t, b.do(t, http.MethodGet, "/v1/deliveries/"+id, nil), http.StatusOK)
		require.Equal(t, herald.DeliveryPending, got.State)
		require.Len(t, *got.Attempts, 1, "the attempt log is kept")

		requireError(t, b.do(t, http.MethodPost, "/v1/deliveries/"+id+"/retry", nil), http.StatusConflict, herald.CodeConflict, "")
		requireError(t, b.do(t, http.MethodPost, "/v1/deliveries/dlv_nope/retry", nil), http.StatusNotFound, herald.CodeNotFound, "")
	})
}

func TestDeadLetterRedrive(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		subA := b.createSub(t, obj{})
		subB := b.createSub(t, obj{})
		e1 := b.publish(t, obj{"type": "a"})
		e2 := b.publish(t, obj{"type": "a"})
		idOf := func(eventID, subID string) string {
			for _, d := range b.deliveriesOf(t, eventID) {
				if d.SubscriptionID == subID {
					return d.ID
				}
			}
			t.Fatalf("no delivery of %s for %s", eventID, subID)
			return ""
		}
		now := time.Now().UTC().Truncate(time.Second)
		early, late := now.Add(-2*time.Hour), now.Add(-time.Hour)
		b.killDeliveries(t, []string{idOf(e1.ID, subA.ID), idOf(e1.ID, subB.ID)}, early)
		b.killDeliveries(t, []string{idOf(e2.ID, subA.ID)}, late)

		redrive := func(body any) response {
			return b.do(t, http.MethodPost, "/v1/dead-letters/redrive", body)
		}
		rfc := func(t time.Time) string { return t.Format(time.RFC3339) }

		// A window that holds no death.
		res := ok[redriveJSON](t, redrive(obj{"subscription_id": subA.ID, "since": rfc(now.Add(-30 * time.Minute))}), http.StatusAccepted)
		require.Equal(t, 0, res.Redriven)
		// [since, until) around the late one only.
		res = ok[redriveJSON](t, redrive(obj{"subscription_id": subA.ID,
			"since": rfc(late.Add(-time.Minute)), "until": rfc(late.Add(time.Minute))}), http.StatusAccepted)
		require.Equal(t, 1, res.Redriven)
		<-b.notified
		require.Equal(t, herald.DeliveryPending, b.deliveriesOf(t, e2.ID)[0].State)
		// No window: the rest of subA's; subB's stays dead.
		res = ok[redriveJSON](t, redrive(obj{"subscription_id": subA.ID}), http.StatusAccepted)
		require.Equal(t, 1, res.Redriven)
		dead := ok[listJSON[deliveryJSON]](t, b.do(t, http.MethodGet, "/v1/deliveries?state=dead", nil), http.StatusOK)
		require.Len(t, dead.Data, 1)
		require.Equal(t, subB.ID, dead.Data[0].SubscriptionID)

		requireError(t, redrive(obj{}), http.StatusBadRequest, herald.CodeMissingField, "subscription_id")
		requireError(t, redrive(obj{"subscription_id": subA.ID, "since": "yesterday"}), http.StatusBadRequest, herald.CodeInvalidField, "since")
		requireError(t, redrive(obj{"subscription_id": subA.ID, "since": rfc(now), "until": rfc(early)}), http.StatusBadRequest, herald.CodeInvalidField, "until")
		requireError(t, redrive(obj{"subscription_id": subA.ID, "tier": 1}), http.StatusBadRequest, herald.CodeUnknownField, "tier")
		requireError(t, redrive(obj{"subscription_id": "sub_nope"}), http.StatusNotFound, herald.CodeNotFound, "")
	})
}
