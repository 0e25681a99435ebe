package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

func TestEventList(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		b.createSub(t, obj{})
		var ids []string
		for i := range 5 {
			ev := obj{"type": "order.created", "data": obj{"n": i}}
			if i%2 == 1 {
				ev["key"] = "k1"
			}
			if i == 4 {
				ev["type"] = "order.paid"
			}
			ids = append(ids, b.publish(t, ev).ID)
		}
		list := func(q string) listJSON[eventListItemJSON] {
			return ok[listJSON[eventListItemJSON]](t, b.do(t, http.MethodGet, "/v1/events"+q, nil), http.StatusOK)
		}
		idsOf := func(l listJSON[eventListItemJSON]) []string {
			var out []string
			for _, e := range l.Data {
				out = append(out, e.ID)
			}
			return out
		}
		// Every event, newest first, in pages of two. Publishes within one
		// millisecond tie on created_at and are ordered by id, so compare
		// as sets and check the paging is complete without repeats.
		var seen []string
		cursor := ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, 5)
			l := list("?limit=2" + cursor)
			seen = append(seen, idsOf(l)...)
			if l.NextCursor == nil {
				break
			}
			cursor = "&cursor=" + url.QueryEscape(*l.NextCursor)
		}
		require.ElementsMatch(t, ids, seen)
		require.Len(t, seen, 5)

		require.ElementsMatch(t, []string{ids[1], ids[3]}, idsOf(list("?key=k1")))
		paid := list("?type=order.paid")
		require.Equal(t, []string{ids[4]}, idsOf(paid))
		require.JSONEq(t, `{"n":4}`, string(paid.Data[0].Data))
		require.NotEmpty(t, paid.Data[0].Timestamp)
		// type takes the globs subscriptions take.
		require.ElementsMatch(t, ids, idsOf(list("?type="+url.QueryEscape("order.*"))))
		require.Equal(t, []string{ids[4]}, idsOf(list("?type="+url.QueryEscape("*.p?id"))))
		require.Empty(t, list("?type="+url.QueryEscape("Order.*")).Data)
		require.Empty(t, list("?since="+url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))).Data)
		require.Len(t, list("?until="+url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))).Data, 5)

		requireError(t, b.do(t, http.MethodGet, "/v1/events?since=yesterday", nil), http.StatusBadRequest, herald.CodeInvalidField, "since")
		requireError(t, b.do(t, http.MethodGet, "/v1/events?cursor=bm9wZQ", nil), http.StatusBadRequest, herald.CodeInvalidCursor, "cursor")
		requireError(t, b.do(t, http.MethodGet, "/v1/events?limit=0", nil), http.StatusBadRequest, herald.CodeInvalidField, "limit")
		requireError(t, b.do(t, http.MethodGet, "/v1/events?type=order.%5Bcp%5D*", nil), http.StatusBadRequest, herald.CodeInvalidField, "type")

		// exclude_system=true leaves out herald's own events (stored here
		// directly: the API refuses to publish herald.*).
		alert := &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: herald.EventTypeDeliveryDead,
			Data: json.RawMessage(`{}`), CreatedAt: time.Now().UTC()}
		_, err := s.EventInsertMany(t.Context(), &store.EventInsertManyParams{Now: alert.CreatedAt,
			Events: []store.EventInsert{{Event: alert}}})
		require.NoError(t, err)
		require.Contains(t, idsOf(list("")), alert.ID)
		require.Contains(t, idsOf(list("?exclude_system=false")), alert.ID)
		require.ElementsMatch(t, ids, idsOf(list("?exclude_system=true")))
		require.Empty(t, list("?exclude_system=true&type="+url.QueryEscape("herald.*")).Data)
		requireError(t, b.do(t, http.MethodGet, "/v1/events?exclude_system=yes", nil), http.StatusBadRequest, herald.CodeInvalidField, "exclude_system")
	})
}

func TestDeliveryListWindow(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		b.createSub(t, obj{})
		b.publish(t, obj{"type": "a"})
		future := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		past := url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
		got := ok[listJSON[deliveryJSON]](t, b.do(t, http.MethodGet, "/v1/deliveries?since="+past+"&until="+future, nil), http.StatusOK)
		require.Len(t, got.Data, 1)
		got = ok[listJSON[deliveryJSON]](t, b.do(t, http.MethodGet, "/v1/deliveries?since="+future, nil), http.StatusOK)
		require.Empty(t, got.Data)
		requireError(t, b.do(t, http.MethodGet, "/v1/deliveries?since="+future+"&until="+past, nil), http.StatusBadRequest, herald.CodeInvalidField, "until")
	})
}

func TestDeadLetterGroupsAndSteppedRedrive(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		sub := b.createSub(t, obj{})
		var ids []string
		for range 5 {
			ev := b.publish(t, obj{"type": "a"})
			ids = append(ids, b.deliveriesOf(t, ev.ID)[0].ID)
		}
		b.killDeliveries(t, ids, time.Now().UTC().Add(-time.Minute))

		// An attempt shows the request it sent, signature masked.
		d := ok[deliveryJSON](t, b.do(t, http.MethodGet, "/v1/deliveries/"+ids[0], nil), http.StatusOK)
		require.Len(t, *d.Attempts, 1)
		req := (*d.Attempts)[0].Request
		require.NotNil(t, req)
		require.Equal(t, http.MethodPost, req.Method)
		require.Equal(t, sub.URL, req.URL)
		require.Equal(t, maskedSignature, req.Headers["webhook-signature"])
		require.Equal(t, ids[0], req.Headers["webhook-id"])
		require.Equal(t, "a", req.Headers["herald-event-type"])
		require.Equal(t, sub.ID, req.Headers["herald-subscription-id"])
		require.Equal(t, "1", req.Headers["herald-attempt"])

		groups := ok[struct {
			Groups []deadLetterGroupJSON `json:"groups"`
		}](t, b.do(t, http.MethodGet, "/v1/dead-letters", nil), http.StatusOK)
		require.Len(t, groups.Groups, 1)
		g := groups.Groups[0]
		require.Equal(t, sub.ID, g.SubscriptionID)
		require.Equal(t, herald.ErrorHTTPStatus, g.Error)
		require.Equal(t, 5, g.Count)

		redrive := func(body obj) response { return b.do(t, http.MethodPost, "/v1/dead-letters/redrive", body) }
		dry := ok[redriveJSON](t, redrive(obj{"subscription_id": sub.ID, "dry_run": true}), http.StatusOK)
		require.Equal(t, redriveJSON{Matched: 5, Remaining: 5}, dry)
		other := ok[redriveJSON](t, redrive(obj{"subscription_id": sub.ID, "error": "timeout", "dry_run": true}), http.StatusOK)
		require.Zero(t, other.Matched)

		// Steps of two until nothing remains.
		var steps []redriveJSON
		for i := 0; i < 5; i++ {
			res := ok[redriveJSON](t, redrive(obj{"subscription_id": sub.ID, "error": "http_status", "limit": 2}), http.StatusAccepted)
			steps = append(steps, res)
			if res.Remaining == 0 {
				break
			}
		}
		require.Equal(t, []redriveJSON{{2, 5, 3}, {2, 3, 1}, {1, 1, 0}}, steps)
		require.Empty(t, ok[struct {
			Groups []deadLetterGroupJSON `json:"groups"`
		}](t, b.do(t, http.MethodGet, "/v1/dead-letters?subscription_id="+sub.ID, nil), http.StatusOK).Groups)

		requireError(t, redrive(obj{"subscription_id": sub.ID, "limit": 0.5}), http.StatusBadRequest, herald.CodeInvalidField, "limit")
		requireError(t, redrive(obj{"subscription_id": sub.ID, "limit": 10001}), http.StatusBadRequest, herald.CodeInvalidField, "limit")
		requireError(t, redrive(obj{"subscription_id": sub.ID, "dry_run": "yes"}), http.StatusBadRequest, herald.CodeInvalidField, "dry_run")
	})
}

func TestFilterTest(t *testing.T) {
	t.Parallel()
	b := setup(t, testdb.SQLite(t))
	type answer struct {
		Matched       bool `json:"matched"`
		TypeMatched   bool `json:"type_matched"`
		FilterMatched bool `json:"filter_matched"`
	}
	try := func(body obj) response { return b.do(t, http.MethodPost, "/v1/filters/test", body) }
	ev := obj{"type": "order.created", "data": obj{"total": 120}}
	tests := []struct {
		name string
		body obj
		want answer
	}{
		{"no filter", obj{"event": ev}, answer{true, true, true}},
		{"cel match", obj{"filter": obj{"cel": "data.total > 100"}, "event": ev}, answer{true, true, true}},
		{"cel miss", obj{"filter": obj{"cel": "data.total > 500"}, "event": ev}, answer{false, true, false}},
		{"type miss", obj{"event_types": []string{"user.*"}, "filter": obj{"cel": "data.total > 100"}, "event": ev}, answer{false, false, true}},
		{"jmespath", obj{"filter": obj{"jmespath": "data.total == `120`"}, "event": ev}, answer{true, true, true}},
		{"es_query", obj{"filter": obj{"es_query": obj{"range": obj{"data.total": obj{"gte": 200}}}}, "event": ev}, answer{false, true, false}},
		{"system type needs a herald pattern", obj{"event_types": []string{"*"}, "event": obj{"type": "herald.test"}}, answer{false, false, true}},
		{"system type named", obj{"event_types": []string{"herald.*"}, "event": obj{"type": "herald.test"}}, answer{true, true, true}},
	}
	for _, tt := range tests {
		got := ok[answer](t, try(tt.body), http.StatusOK)
		require.Equal(t, tt.want, got, tt.name)
	}
	requireError(t, try(obj{"filter": obj{"cel": "data.total >"}, "event": ev}), http.StatusUnprocessableEntity, herald.CodeInvalidFilter, "filter.cel")
	requireError(t, try(obj{"filter": obj{"cel": "true"}}), http.StatusBadRequest, herald.CodeMissingField, "event")
	requireError(t, try(obj{"event": obj{"data": 1}}), http.StatusBadRequest, herald.CodeMissingField, "event.type")
}

func TestSubscriptionTestEvent(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		// Event types and a filter the test event does not match: it is
		// sent anyway, to this subscription only.
		sub := b.createSub(t, obj{"event_types": []string{"order.*"}, "filter": obj{"cel": "data.total > 100"}})
		bystander := b.createSub(t, obj{"event_types": []string{"*", "herald.*"}})
		type answer struct {
			EventID    string `json:"event_id"`
			DeliveryID string `json:"delivery_id"`
		}
		got := ok[answer](t, b.do(t, http.MethodPost, "/v1/subscriptions/"+sub.ID+"/test", nil), http.StatusAccepted)
		<-b.notified
		ev := ok[eventJSON](t, b.do(t, http.MethodGet, "/v1/events/"+got.EventID, nil), http.StatusOK)
		require.Equal(t, TestEventType, ev.Type)
		require.Len(t, ev.Deliveries, 1)
		require.Equal(t, got.DeliveryID, ev.Deliveries[0].ID)
		require.Equal(t, sub.ID, ev.Deliveries[0].SubscriptionID)
		require.NotEqual(t, bystander.ID, ev.Deliveries[0].SubscriptionID)

		got = ok[answer](t, b.do(t, http.MethodPost, "/v1/subscriptions/"+sub.ID+"/test", obj{"data": obj{"hello": "world"}}), http.StatusAccepted)
		ev = ok[eventJSON](t, b.do(t, http.MethodGet, "/v1/events/"+got.EventID, nil), http.StatusOK)
		require.JSONEq(t, `{"hello":"world"}`, string(ev.Data))

		requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions/sub_nope/test", nil), http.StatusNotFound, herald.CodeNotFound, "")
		requireError(t, b.do(t, http.MethodPost, "/v1/subscriptions/"+sub.ID+"/test", obj{"type": "x"}), http.StatusBadRequest, herald.CodeUnknownField, "type")
	})
}

func TestSubscriptionStats(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		sub := b.createSub(t, obj{})
		var ids []string
		for range 3 {
			ev := b.publish(t, obj{"type": "a"})
			ids = append(ids, b.deliveriesOf(t, ev.ID)[0].ID)
		}
		b.killDeliveries(t, ids[:1], time.Now().UTC())
		type row = subscriptionStatsJSON
		got := ok[struct {
			Since string `json:"since"`
			Data  []row  `json:"data"`
		}](t, b.do(t, http.MethodGet, "/v1/stats/subscriptions", nil), http.StatusOK)
		require.Len(t, got.Data, 1)
		require.Equal(t, sub.ID, got.Data[0].SubscriptionID)
		require.Equal(t, 1, got.Data[0].Dead)
		require.Equal(t, 2, got.Data[0].Pending)
		require.NotNil(t, got.Data[0].SuccessRate)
		require.Zero(t, *got.Data[0].SuccessRate)

		future := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		got = ok[struct {
			Since string `json:"since"`
			Data  []row  `json:"data"`
		}](t, b.do(t, http.MethodGet, "/v1/stats/subscriptions?since="+future, nil), http.StatusOK)
		require.Len(t, got.Data, 1, "the queue is counted whatever the window")
		require.Nil(t, got.Data[0].SuccessRate)
	})
}

func TestStatsHistory(t *testing.T) {
	t.Parallel()
	s := testdb.SQLite(t)
	b := setup(t, s)
	type answer struct {
		IntervalS int                `json:"interval_s"`
		StartedAt string             `json:"started_at"`
		Points    []historyPointJSON `json:"points"`
	}
	empty := ok[answer](t, b.do(t, http.MethodGet, "/v1/stats/history", nil), http.StatusOK)
	require.Equal(t, 10, empty.IntervalS)
	require.Empty(t, empty.Points, "no history configured")
	require.Empty(t, empty.StartedAt)

	clock := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	p50 := 20 * time.Millisecond
	h := fakeHistory{interval: 30 * time.Second, started: clock.Add(-15 * time.Second), points: []HistoryPoint{
		{At: clock.Add(-30 * time.Second)},
		{At: clock, Published: 7, Delivered: 1, LatencyP50: &p50, LatencyP99: &p50},
	}}
	b.handler = New(Config{Store: s, Publisher: failingPublisher{}, Auth: NewTokenAuth(s, testToken), History: h})
	got := ok[answer](t, b.do(t, http.MethodGet, "/v1/stats/history", nil), http.StatusOK)
	require.Equal(t, 30, got.IntervalS)
	require.Equal(t, "2026-11-24T09:59:45Z", got.StartedAt, "points before it are unknown, not empty")
	require.Len(t, got.Points, 2)
	last := got.Points[len(got.Points)-1]
	require.Equal(t, "2026-11-24T10:00:00Z", last.At)
	require.Equal(t, 7, last.Published)
	require.Equal(t, 1, last.Delivered)
	require.NotNil(t, last.LatencyP50MS)
	require.InDelta(t, 20, *last.LatencyP50MS, 1e-9)
	require.Nil(t, got.Points[0].LatencyP99MS)
}

// fakeHistory is a History with fixed points (metrics.History's own test
// covers the counting).
type fakeHistory struct {
	interval time.Duration
	started  time.Time
	points   []HistoryPoint
}

func (f fakeHistory) Started() time.Time      { return f.started }
func (f fakeHistory) Interval() time.Duration { return f.interval }
func (f fakeHistory) Points() []HistoryPoint  { return f.points }
