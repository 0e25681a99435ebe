package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

func TestEventPublish(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		sub := b.createSub(t, obj{"event_types": []string{"bundle.*"}})

		// A generated id.
		res := b.publish(t, obj{"type": "bundle.indexed", "data": obj{"size": 3}})
		require.Regexp(t, `^evt_[0-9a-z]{26}$`, res.ID)
		require.False(t, res.Duplicate)
		require.Equal(t, 1, res.Deliveries)

		// A producer id is the idempotency key: the repeat creates nothing
		// and reports the original count, even when the subscriptions
		// changed in between.
		first := b.publish(t, obj{"id": "order-42/v1", "type": "bundle.indexed", "key": "k1", "version": 7, "data": obj{"a": []int{1, 2}}})
		require.Equal(t, publishJSON{ID: "order-42/v1", Duplicate: false, Deliveries: 1}, first)
		b.createSub(t, obj{})
		again := b.publish(t, obj{"id": "order-42/v1", "type": "bundle.indexed"})
		require.Equal(t, publishJSON{ID: "order-42/v1", Duplicate: true, Deliveries: 1}, again)

		// No match: stored with no deliveries.
		none := b.publish(t, obj{"type": "other.thing"})
		require.Equal(t, 1, none.Deliveries, "only the blanket subscription matches")

		// GET shows the event and its deliveries.
		ev := ok[obj](t, b.do(t, http.MethodGet, "/v1/events/"+url.PathEscape("order-42/v1"), nil), http.StatusOK)
		require.Equal(t, "order-42/v1", ev["id"])
		require.Equal(t, "bundle.indexed", ev["type"])
		require.Equal(t, "k1", ev["key"])
		require.Equal(t, float64(7), ev["version"])
		require.Equal(t, obj{"a": []any{float64(1), float64(2)}}, ev["data"])
		require.NotEmpty(t, ev["timestamp"])
		dl, _ := ev["deliveries"].([]any)
		require.Len(t, dl, 1)
		d0 := dl[0].(map[string]any)
		require.Equal(t, sub.ID, d0["subscription_id"])
		require.Equal(t, "pending", d0["state"])
		require.Regexp(t, `^dlv_`, d0["id"])

		// Absent data is null.
		ev = ok[obj](t, b.do(t, http.MethodGet, "/v1/events/"+none.ID, nil), http.StatusOK)
		require.Contains(t, ev, "data")
		require.Nil(t, ev["data"])
		require.NotContains(t, ev, "key")
		require.NotContains(t, ev, "version")

		requireError(t, b.do(t, http.MethodGet, "/v1/events/evt_nope", nil), http.StatusNotFound, herald.CodeNotFound, "")
	})
}

func TestEventFanout(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		glob := b.createSub(t, obj{"event_types": []string{"bundle.*"}})
		cel := b.createSub(t, obj{"filter": obj{"cel": "data.size > 10"}})
		other := b.createSub(t, obj{"event_types": []string{"user.*"}})
		es := b.createSub(t, obj{"filter": obj{"es_query": obj{"query": obj{"term": obj{"data.color": "red"}}}}})
		require.JSONEq(t, `{"query":{"term":{"data.color":"red"}}}`, string(es.Filter.ESQuery))
		jmes := b.createSub(t, obj{"event_types": []string{"user.*"}, "filter": obj{"jmespath": "data.size < `11`"}})
		disabled := b.createSub(t, obj{"state": "disabled"})
		require.Equal(t, herald.SubscriptionDisabled, disabled.State)

		subsOf := func(eventID string) []string {
			var ids []string
			for _, d := range b.deliveriesOf(t, eventID) {
				require.Equal(t, eventID, d.EventID)
				ids = append(ids, d.SubscriptionID)
			}
			sort.Strings(ids)
			return ids
		}
		sorted := func(ids ...string) []string { sort.Strings(ids); return ids }

		small := b.publish(t, obj{"type": "bundle.a.b", "data": obj{"size": 5}})
		require.Equal(t, 1, small.Deliveries)
		require.Equal(t, []string{glob.ID}, subsOf(small.ID))

		big := b.publish(t, obj{"type": "bundle.indexed", "data": obj{"size": 20}})
		require.Equal(t, 2, big.Deliveries)
		require.Equal(t, sorted(glob.ID, cel.ID), subsOf(big.ID))

		user := b.publish(t, obj{"type": "user.created", "data": obj{"size": 11}})
		require.Equal(t, sorted(cel.ID, other.ID), subsOf(user.ID))

		red := b.publish(t, obj{"type": "user.deleted", "data": obj{"size": 1, "color": "red"}})
		require.Equal(t, sorted(es.ID, other.ID, jmes.ID), subsOf(red.ID))

		nobody := b.publish(t, obj{"type": "misc", "data": obj{"size": 1}})
		require.Equal(t, 0, nobody.Deliveries)
		require.Empty(t, subsOf(nobody.ID))
	})
}

func TestEventBatch(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		b.createSub(t, obj{})
		b.publish(t, obj{"id": "seen-before", "type": "a.b"})

		res := ok[batchJSON](t, b.do(t, http.MethodPost, "/v1/events/batch", obj{"events": []any{
			obj{"id": "b-0", "type": "a.b", "data": obj{"n": 0}},
			obj{"id": "b-1", "data": obj{"n": 1}}, // no type
			obj{"type": "a.c"},
			obj{"id": "seen-before", "type": "a.b"},
			"not an object",
			obj{"id": "b-5", "type": "a.b", "version": 1.5},
			obj{"id": "b-0", "type": "a.b"}, // repeats item 0
			obj{"id": "b-7", "type": "a.b", "bogus": true},
		}}), http.StatusOK)
		require.Len(t, res.Results, 8)
		for i, r := range res.Results {
			require.Equal(t, i, r.Index)
		}
		one := 1
		require.Equal(t, batchResultJSON{Index: 0, ID: "b-0", Status: "accepted", Deliveries: &one}, res.Results[0])
		require.Equal(t, batchResultJSON{Index: 1, ID: "b-1", Status: "rejected", Error: &errorJSON{
			Code: herald.CodeMissingField, Message: "events[1].type is required", Field: "events[1].type"}}, res.Results[1])
		require.Equal(t, "accepted", res.Results[2].Status)
		require.Regexp(t, `^evt_`, res.Results[2].ID)
		require.Equal(t, "duplicate", res.Results[3].Status)
		require.Equal(t, "seen-before", res.Results[3].ID)
		require.Equal(t, "rejected", res.Results[4].Status)
		require.Equal(t, "events[4]", res.Results[4].Error.Field)
		require.Equal(t, "rejected", res.Results[5].Status)
		require.Equal(t, "events[5].version", res.Results[5].Error.Field)
		require.Equal(t, "duplicate", res.Results[6].Status)
		require.Equal(t, herald.CodeUnknownField, res.Results[7].Error.Code)
		require.Equal(t, "events[7].bogus", res.Results[7].Error.Field)

		// The accepted ones are stored; the rejected ones are not.
		ok[obj](t, b.do(t, http.MethodGet, "/v1/events/b-0", nil), http.StatusOK)
		ok[obj](t, b.do(t, http.MethodGet, "/v1/events/"+res.Results[2].ID, nil), http.StatusOK)
		for _, id := range []string{"b-1", "b-5", "b-7"} {
			requireError(t, b.do(t, http.MethodGet, "/v1/events/"+id, nil), http.StatusNotFound, herald.CodeNotFound, "")
		}

		// All rejected: nothing stored, still 200.
		res = ok[batchJSON](t, b.do(t, http.MethodPost, "/v1/events/batch", obj{"events": []any{obj{}}}), http.StatusOK)
		require.Equal(t, "rejected", res.Results[0].Status)

		// Whole-body errors fail the call.
		requireError(t, b.do(t, http.MethodPost, "/v1/events/batch", obj{}), http.StatusBadRequest, herald.CodeMissingField, "events")
		requireError(t, b.do(t, http.MethodPost, "/v1/events/batch", obj{"events": obj{}}), http.StatusBadRequest, herald.CodeInvalidField, "events")
		requireError(t, b.do(t, http.MethodPost, "/v1/events/batch", `{"events": [`), http.StatusBadRequest, herald.CodeInvalidJSON, "")
		tooMany := make([]obj, MaxBatchEvents+1)
		for i := range tooMany {
			tooMany[i] = obj{"type": "a"}
		}
		requireError(t, b.do(t, http.MethodPost, "/v1/events/batch", obj{"events": tooMany}), http.StatusBadRequest, herald.CodeInvalidField, "events")

		// 1000 items in one call are fine.
		items := make([]obj, MaxBatchEvents)
		for i := range items {
			items[i] = obj{"id": fmt.Sprintf("bulk-%04d", i), "type": "bulk", "data": strings.Repeat("x", 100)}
		}
		res = ok[batchJSON](t, b.do(t, http.MethodPost, "/v1/events/batch", obj{"events": items}), http.StatusOK)
		require.Len(t, res.Results, MaxBatchEvents)
		for i, r := range res.Results {
			require.Equal(t, fmt.Sprintf("bulk-%04d", i), r.ID)
			require.Equal(t, "accepted", r.Status)
		}
	})
}

// TestEventBatchRetry posts the same batch of more than 250 events twice
// (issue 20: the retry failed with 500 on SQLite) with new events added to
// the retry: every old one is a duplicate, every new one is stored.
func TestEventBatchRetry(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		b.createSub(t, obj{})
		const n = 600
		events := make([]obj, n)
		for i := range events {
			events[i] = obj{"id": fmt.Sprintf("retry-%d", i), "type": "a.b"}
		}
		first := ok[batchJSON](t, b.do(t, http.MethodPost, "/v1/events/batch", obj{"events": events}), http.StatusOK)
		for _, r := range first.Results {
			require.Equal(t, "accepted", r.Status, "item %d", r.Index)
		}

		retry := append(events[:n:n], obj{"id": "retry-new-0", "type": "a.b"}, obj{"id": "retry-new-1", "type": "a.b"})
		again := ok[batchJSON](t, b.do(t, http.MethodPost, "/v1/events/batch", obj{"events": retry}), http.StatusOK)
		require.Len(t, again.Results, len(retry))
		for i, r := range again.Results {
			want := "duplicate"
			if i >= n {
				want = "accepted"
			}
			require.Equal(t, want, r.Status, "item %d", i)
			require.Equal(t, 1, *r.Deliveries, "item %d", i)
		}
		ok[obj](t, b.do(t, http.MethodGet, "/v1/events/retry-new-1", nil), http.StatusOK)
	})
}
