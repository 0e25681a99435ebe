package httpapi

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// Input a store cannot keep — bytes that are not UTF-8 (encoding/json lets
// them through), NUL (PostgreSQL refuses it in text), control characters in
// keys and descriptions — is refused at the door with the field at fault,
// and changes nothing.
func TestHostileInputRefused(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		sub := b.createSub(t, obj{})
		subPath := "/v1/subscriptions/" + sub.ID
		const bad = http.StatusBadRequest
		cases := []struct {
			name, method, path, body string
			field                    string
		}{
			{"event key with NUL", http.MethodPost, "/v1/events", `{"type": "a", "key": "k\u0000ey"}`, "key"},
			{"event key with escape", http.MethodPost, "/v1/events", `{"type": "a", "key": "k\u001b[2J"}`, "key"},
			{"event key with newline", http.MethodPost, "/v1/events", `{"type": "a", "key": "k\n"}`, "key"},
			{"event key with C1 control", http.MethodPost, "/v1/events", `{"type": "a", "key": "k\u0085"}`, "key"},
			{"event key with Latin-1 byte", http.MethodPost, "/v1/events", "{\"type\": \"a\", \"key\": \"caf\xe9\"}", "key"},
			{"event data with Latin-1 byte", http.MethodPost, "/v1/events", "{\"type\": \"a\", \"data\": {\"name\": \"caf\xe9\"}}", "data"},
			{"event data with a lone continuation byte", http.MethodPost, "/v1/events", "{\"type\": \"a\", \"data\": [\"\x80\"]}", "data"},
			{"event type with Latin-1 byte", http.MethodPost, "/v1/events", "{\"type\": \"a\xe9\"}", "type"},
			{"event id with NUL", http.MethodPost, "/v1/events", `{"type": "a", "id": "x\u0000"}`, "id"},
			{"description with NUL", http.MethodPost, "/v1/subscriptions", `{"url": "https://a.example", "description": "a\u0000b"}`, "description"},
			{"description with escape", http.MethodPost, "/v1/subscriptions", `{"url": "https://a.example", "description": "\u001b[31mred"}`, "description"},
			{"description with Latin-1 byte", http.MethodPost, "/v1/subscriptions", "{\"url\": \"https://a.example\", \"description\": \"caf\xe9\"}", "description"},
			{"metadata with Latin-1 byte", http.MethodPost, "/v1/subscriptions", "{\"url\": \"https://a.example\", \"metadata\": {\"a\": \"caf\xe9\"}}", "metadata"},
			{"CEL filter with NUL", http.MethodPost, "/v1/subscriptions", `{"url": "https://a.example", "filter": {"cel": "data.a == '\u0000'"}}`, "filter.cel"},
			{"event type pattern with NUL", http.MethodPost, "/v1/subscriptions", `{"url": "https://a.example", "event_types": ["a", "b\u0000"]}`, "event_types[1]"},
			{"patched description with NUL", http.MethodPatch, subPath, `{"description": "a\u0000b"}`, "description"},
			{"patched description with Latin-1 byte", http.MethodPatch, subPath, "{\"description\": \"caf\xe9\"}", "description"},
			{"patched metadata with Latin-1 byte", http.MethodPatch, subPath, "{\"metadata\": {\"a\": \"\xff\"}}", "metadata"},
			{"token name with NUL", http.MethodPost, "/v1/tokens", `{"name": "a\u0000", "scopes": ["events:read"]}`, "name"},
			{"token name with escape", http.MethodPost, "/v1/tokens", `{"name": "\u001b[2Ja", "scopes": ["events:read"]}`, "name"},
			{"token name with newline", http.MethodPost, "/v1/tokens", `{"name": "a\nb", "scopes": ["events:read"]}`, "name"},
			{"token name with Latin-1 byte", http.MethodPost, "/v1/tokens", "{\"name\": \"caf\xe9\", \"scopes\": [\"events:read\"]}", "name"},
			{"tenant with NUL", http.MethodPost, "/v1/subscriptions", `{"url": "https://a.example", "tenant": "a\u0000"}`, "tenant"},
			{"portal theme name with escape", http.MethodPost, "/v1/tenants/acme/portal", `{"theme": {"name": "\u001b]0;x"}}`, "theme.name"},
			{"portal theme name with Latin-1 byte", http.MethodPost, "/v1/tenants/acme/portal", "{\"theme\": {\"name\": \"caf\xe9\"}}", "theme"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				res := b.do(t, tc.method, tc.path, tc.body)
				requireError(t, res, bad, herald.CodeInvalidField, tc.field)
			})
		}

		// Nothing was stored or changed.
		got, err := s.SubscriptionGet(t.Context(), sub.ID)
		require.NoError(t, err)
		require.Empty(t, got.Description)
		list, err := s.SubscriptionList(t.Context(), &store.SubscriptionListParams{})
		require.NoError(t, err)
		require.Len(t, list.Subscriptions, 1)
		page := ok[listJSON[deliveryJSON]](t, b.do(t, http.MethodGet, "/v1/deliveries", nil), http.StatusOK)
		require.Empty(t, page.Data, "no event was published")

		// What stays allowed: line breaks in a description, any Unicode.
		b.createSub(t, obj{"description": "line one\n\tline two", "metadata": obj{"name": "café ✓"}})
		b.publish(t, obj{"type": "a", "key": "café-✓", "data": obj{"s": "\u0000 is fine inside data"}})
	})
}

// The batch API rejects a bad item alone, with its own result, and stores
// the others.
func TestHostileInputBatchRejectsItemsAlone(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		b.createSub(t, obj{})
		body := "{\"events\": [" +
			`{"id": "good-0", "type": "a"},` +
			`{"id": "nul-key", "type": "a", "key": "k\u0000"},` +
			"{\"id\": \"latin1-data\", \"type\": \"a\", \"data\": \"caf\xe9\"}," +
			`{"id": "good-3", "type": "a", "key": "k"},` +
			"{\"id\": \"latin1-key\", \"type\": \"a\", \"key\": \"\xff\"}" +
			"]}"
		out := ok[batchJSON](t, b.do(t, http.MethodPost, "/v1/events/batch", body), http.StatusOK)
		require.Len(t, out.Results, 5)
		for _, i := range []int{0, 3} {
			require.Equal(t, batchAccepted, out.Results[i].Status, "%+v", out.Results[i])
			_, err := s.EventGet(t.Context(), &store.EventGetParams{ID: out.Results[i].ID})
			require.NoError(t, err)
		}
		for i, field := range map[int]string{1: "events[1].key", 2: "events[2].data", 4: "events[4].key"} {
			r := out.Results[i]
			require.Equal(t, batchRejected, r.Status, "%+v", r)
			require.NotNil(t, r.Error)
			require.Equal(t, herald.CodeInvalidField, r.Error.Code)
			require.Equal(t, field, r.Error.Field)
			_, err := s.EventGet(t.Context(), &store.EventGetParams{ID: r.ID})
			require.ErrorIs(t, err, herald.ErrNotFound)
		}
	})
}

// The scenario: good publishes sent beside hostile ones all
// succeed, and the hostile ones all get a 400 (on PostgreSQL they used to
// fail the group commit they shared, answering good publishes 500).
func TestHostileInputBesideGoodPublishes(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		b.createSub(t, obj{})
		const good, hostile = 60, 6
		codes := make([]int, good+hostile)
		var wg sync.WaitGroup
		for i := range codes {
			body := fmt.Sprintf(`{"type": "a.b", "key": "k%d", "data": {"i": %d}}`, i, i)
			if i >= good {
				if i%2 == 0 {
					body = `{"type": "a.b", "key": "k\u0000"}`
				} else {
					body = "{\"type\": \"a.b\", \"data\": {\"s\": \"caf\xe9\"}}"
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i] = b.do(t, http.MethodPost, "/v1/events", body).code
			}()
		}
		wg.Wait()
		for i, c := range codes {
			want := http.StatusAccepted
			if i >= good {
				want = http.StatusBadRequest
			}
			require.Equal(t, want, c, "publish %d", i)
		}
	})
}
