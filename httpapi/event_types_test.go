package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// TestEventTypePatterns: the API accepts exactly the patterns the matcher
// implements. "order.[ab]*" used to be accepted (path.Match syntax) and
// then never matched.
func TestEventTypePatterns(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		sub := b.createSub(t, obj{})

		for _, tc := range []struct {
			method, path string
			patterns     []string
			field, holds string
		}{
			{http.MethodPost, "/v1/subscriptions", []string{"order.[ab]*"}, "event_types[0]", `"["`},
			{http.MethodPost, "/v1/subscriptions", []string{"order.*", "order.cre]ated"}, "event_types[1]", `"]"`},
			{http.MethodPost, "/v1/subscriptions", []string{`order.\*`}, "event_types[0]", `"\\"`},
			{http.MethodPost, "/v1/subscriptions", []string{"order created"}, "event_types[0]", "whitespace"},
			{http.MethodPost, "/v1/subscriptions", []string{strings.Repeat("é", 257)}, "event_types[0]", "257 characters"},
			{http.MethodPatch, "/v1/subscriptions/" + sub.ID, []string{"a.*", "b.*", "order.[!a]"}, "event_types[2]", `"["`},
		} {
			body := obj{"event_types": tc.patterns}
			if tc.method == http.MethodPost {
				body["url"] = "https://a.example"
			}
			e := requireError(t, b.do(t, tc.method, tc.path, body), http.StatusBadRequest, herald.CodeInvalidField, tc.field)
			require.Contains(t, e.Message, tc.holds)
			require.Contains(t, e.Message, "'*' matches any run of characters", "the message says what is supported")
			require.NotContains(t, e.Message, "[a-z]")
		}

		// Nothing changed: the PATCH left the patterns as they were.
		got := ok[subscriptionJSON](t, b.do(t, http.MethodGet, "/v1/subscriptions/"+sub.ID, nil), http.StatusOK)
		require.Empty(t, got.EventTypes)

		// What is accepted matches as documented: '?' is one character,
		// multi-byte ones included, '*' crosses dots.
		wild := b.createSub(t, obj{"event_types": []string{"order.?té", "bundle.*.done"}})
		for typ, want := range map[string]int{"order.été": 1, "order.ete": 0, "bundle.a.b.done": 1, "bundle.done": 0} {
			res := b.publish(t, obj{"type": typ})
			subs := 0
			for _, d := range b.deliveriesOf(t, res.ID) {
				if d.SubscriptionID == wild.ID {
					subs++
				}
			}
			require.Equal(t, want, subs, typ)
		}
	})
}
