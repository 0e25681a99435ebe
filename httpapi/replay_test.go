package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

func TestEventResend(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		sub := b.createSub(t, obj{})
		// Resend ignores event types and filters: the caller chose the
		// subscription.
		other := b.createSub(t, obj{"event_types": []string{"user.*"}, "filter": obj{"cel": "data.n > 100"}})
		ev := b.publish(t, obj{"type": "order.created", "data": obj{"n": 1}})
		require.Len(t, b.deliveriesOf(t, ev.ID), 1)
		resend := func(eventID string, body any) response {
			return b.do(t, http.MethodPost, "/v1/events/"+eventID+"/resend", body)
		}

		for _, to := range []string{sub.ID, sub.ID, other.ID} {
			res := ok[resendJSON](t, resend(ev.ID, obj{"subscription_id": to}), http.StatusAccepted)
			require.Equal(t, resendJSON{DeliveryID: res.DeliveryID, EventID: ev.ID, SubscriptionID: to}, res)
			<-b.notified
			got := ok[deliveryDetailJSON](t, b.do(t, http.MethodGet, "/v1/deliveries/"+res.DeliveryID, nil), http.StatusOK)
			require.Equal(t, herald.DeliveryPending, got.State)
			require.Equal(t, to, got.SubscriptionID)
		}
		require.Len(t, b.deliveriesOf(t, ev.ID), 4, "every call makes a new delivery")

		// A tenanted event goes only to a subscription that receives its
		// tenant.
		acme := b.publish(t, obj{"type": "order.created", "tenant": "acme"})
		requireError(t, resend(acme.ID, obj{"subscription_id": sub.ID}), http.StatusBadRequest, herald.CodeInvalidField, "subscription_id")
		audit := b.createSub(t, obj{"all_tenants": true})
		ok[resendJSON](t, resend(acme.ID, obj{"subscription_id": audit.ID}), http.StatusAccepted)
		acmeSub := b.createSub(t, obj{"tenant": "acme"})
		ok[resendJSON](t, b.do(t, http.MethodPost, "/v1/events/"+acme.ID+"/resend?tenant=acme", obj{"subscription_id": acmeSub.ID}), http.StatusAccepted)
		requireError(t, b.do(t, http.MethodPost, "/v1/events/"+acme.ID+"/resend?tenant=", obj{"subscription_id": acmeSub.ID}),
			http.StatusNotFound, herald.CodeNotFound, "")

		// A disabled subscription is refused; re-enabled it takes it.
		ok[subscriptionJSON](t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+sub.ID, obj{"state": "disabled"}), http.StatusOK)
		requireError(t, resend(ev.ID, obj{"subscription_id": sub.ID}), http.StatusConflict, herald.CodeConflict, "")
		ok[subscriptionJSON](t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+sub.ID, obj{"state": "enabled"}), http.StatusOK)
		ok[resendJSON](t, resend(ev.ID, obj{"subscription_id": sub.ID}), http.StatusAccepted)

		requireError(t, resend(ev.ID, obj{}), http.StatusBadRequest, herald.CodeMissingField, "subscription_id")
		requireError(t, resend(ev.ID, obj{"subscription_id": sub.ID, "tier": 1}), http.StatusBadRequest, herald.CodeUnknownField, "tier")
		requireError(t, resend(ev.ID, obj{"subscription_id": "sub_nope"}), http.StatusNotFound, herald.CodeNotFound, "")
		requireError(t, resend("evt_nope", obj{"subscription_id": sub.ID}), http.StatusNotFound, herald.CodeNotFound, "")
		require.Equal(t, http.StatusNoContent, b.do(t, http.MethodDelete, "/v1/subscriptions/"+other.ID, nil).code)
		requireError(t, resend(ev.ID, obj{"subscription_id": other.ID}), http.StatusNotFound, herald.CodeNotFound, "")
	})
}

func TestSubscriptionReplay(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		// An event older than the subscription is never replayed.
		old := &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "order.created", Data: json.RawMessage(`{"n":5}`),
			CreatedAt: time.Now().Add(-time.Hour).UTC()}
		_, err := s.EventInsertMany(t.Context(), &store.EventInsertManyParams{Now: old.CreatedAt, Events: []store.EventInsert{{Event: old}}})
		require.NoError(t, err)

		sub := b.createSub(t, obj{"event_types": []string{"order.*"}, "filter": obj{"cel": "data.n > 1"}})
		created, err := time.Parse(time.RFC3339Nano, sub.CreatedAt)
		require.NoError(t, err)
		var want []string
		for _, e := range []obj{
			{"type": "order.created", "data": obj{"n": 1}}, // filtered out
			{"type": "order.created", "data": obj{"n": 2}},
			{"type": "order.paid", "data": obj{"n": 3}},
			{"type": "user.created", "data": obj{"n": 4}},                    // not its type
			{"type": "order.created", "data": obj{"n": 5}, "tenant": "acme"}, // not its tenant
		} {
			pub := b.publish(t, e)
			if pub.Deliveries == 1 {
				want = append(want, pub.ID)
			}
		}
		require.Len(t, want, 2, "the fan-out sent the two replay will match")
		rfc := func(v time.Time) string { return v.UTC().Format(time.RFC3339Nano) }
		window := obj{"since": rfc(created.Add(-2 * time.Hour)), "until": rfc(time.Now().Add(time.Minute))}
		replay := func(extra obj) response {
			body := obj{}
			for k, v := range window {
				body[k] = v
			}
			for k, v := range extra {
				body[k] = v
			}
			return b.do(t, http.MethodPost, "/v1/subscriptions/"+sub.ID+"/replay", body)
		}

		// The dry run counts and creates nothing.
		dry := ok[replayJSON](t, replay(obj{"dry_run": true}), http.StatusOK)
		require.Equal(t, replayJSON{Matched: 2, DryRun: true}, dry)
		for _, id := range want {
			require.Len(t, b.deliveriesOf(t, id), 1)
		}
		// The replay sends them again; a second call sends again.
		for round := 2; round <= 3; round++ {
			res := ok[replayJSON](t, replay(nil), http.StatusAccepted)
			require.Equal(t, replayJSON{Matched: 2, Replayed: 2}, res)
			<-b.notified
			for _, id := range want {
				require.Len(t, b.deliveriesOf(t, id), round)
			}
		}
		require.Empty(t, b.deliveriesOf(t, old.ID))
		// event_types narrows the subscription's own types, never widens.
		require.Equal(t, 1, ok[replayJSON](t, replay(obj{"event_types": []string{"order.paid"}, "dry_run": true}), http.StatusOK).Matched)
		require.Equal(t, 0, ok[replayJSON](t, replay(obj{"event_types": []string{"user.*"}, "dry_run": true}), http.StatusOK).Matched)
		require.Equal(t, 2, ok[replayJSON](t, replay(obj{"event_types": []string{"order.paid", "order.created"}, "dry_run": true}), http.StatusOK).Matched)
		// [since, until): a window before the events matches nothing.
		none := ok[replayJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions/"+sub.ID+"/replay",
			obj{"since": rfc(created.Add(-time.Hour)), "until": rfc(created)}), http.StatusOK)
		require.Equal(t, replayJSON{}, none)

		// A disabled subscription is counted but not replayed to.
		ok[subscriptionJSON](t, b.do(t, http.MethodPatch, "/v1/subscriptions/"+sub.ID, obj{"state": "disabled"}), http.StatusOK)
		requireError(t, replay(nil), http.StatusConflict, herald.CodeConflict, "")
		require.Equal(t, 2, ok[replayJSON](t, replay(obj{"dry_run": true}), http.StatusOK).Matched)

		path := "/v1/subscriptions/" + sub.ID + "/replay"
		since := window["since"]
		requireError(t, b.do(t, http.MethodPost, path, obj{"until": since}), http.StatusBadRequest, herald.CodeMissingField, "since")
		requireError(t, b.do(t, http.MethodPost, path, obj{"since": since}), http.StatusBadRequest, herald.CodeMissingField, "until")
		requireError(t, b.do(t, http.MethodPost, path, obj{"since": "yesterday", "until": since}), http.StatusBadRequest, herald.CodeInvalidField, "since")
		requireError(t, b.do(t, http.MethodPost, path, obj{"since": since, "until": since}), http.StatusBadRequest, herald.CodeInvalidField, "until")
		long := requireError(t, b.do(t, http.MethodPost, path, obj{"since": rfc(created), "until": rfc(created.Add(32 * 24 * time.Hour))}),
			http.StatusBadRequest, herald.CodeInvalidField, "until")
		require.Contains(t, long.Message, "31 days")
		ok[replayJSON](t, b.do(t, http.MethodPost, path, obj{"since": rfc(created), "until": rfc(created.Add(31 * 24 * time.Hour)), "dry_run": true}), http.StatusOK)
		requireError(t, replay(obj{"event_types": []string{""}}), http.StatusBadRequest, herald.CodeInvalidField, "event_types[0]")
		requireError(t, replay(obj{"cursor": "%%%"}), http.StatusBadRequest, herald.CodeInvalidCursor, "cursor")
		requireError(t, replay(obj{"limit": 5}), http.StatusBadRequest, herald.CodeUnknownField, "limit")
		requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions/sub_nope/replay", window), http.StatusNotFound, herald.CodeNotFound, "")
	})
}

// TestSubscriptionReplayTruncated: one call matches at most
// maxReplayEvents events; the cursor goes on from there.
func TestSubscriptionReplayTruncated(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		sub := b.createSub(t, obj{})
		created, err := time.Parse(time.RFC3339Nano, sub.CreatedAt)
		require.NoError(t, err)
		n := maxReplayEvents + 1
		events := make([]store.EventInsert, n)
		for i := range events {
			events[i] = store.EventInsert{Event: &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "a",
				CreatedAt: created.Add(time.Duration(i%1000) * time.Millisecond)}}
		}
		_, err = s.EventInsertMany(t.Context(), &store.EventInsertManyParams{Now: created, Events: events})
		require.NoError(t, err)
		body := obj{"since": created.Format(time.RFC3339Nano), "until": created.Add(time.Minute).Format(time.RFC3339Nano)}
		path := "/v1/subscriptions/" + sub.ID + "/replay"

		first := ok[replayJSON](t, b.do(t, http.MethodPost, path, body), http.StatusAccepted)
		require.Equal(t, maxReplayEvents, first.Matched)
		require.Equal(t, maxReplayEvents, first.Replayed)
		require.True(t, first.Truncated)
		require.NotNil(t, first.NextCursor)
		body["cursor"] = *first.NextCursor
		rest := ok[replayJSON](t, b.do(t, http.MethodPost, path, body), http.StatusAccepted)
		require.Equal(t, replayJSON{Matched: 1, Replayed: 1}, rest)

		page := ok[listJSON[deliveryJSON]](t, b.do(t, http.MethodGet, "/v1/deliveries?subscription_id="+sub.ID+"&limit=1", nil), http.StatusOK)
		require.Len(t, page.Data, 1)
		st, err := s.StatsGet(t.Context(), &store.StatsGetParams{Tiers: 1, Now: time.Now()})
		require.NoError(t, err)
		require.EqualValues(t, n, st.Tiers[0].Pending, "one delivery per event, none twice")
	})
}
