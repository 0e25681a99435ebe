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

// TestFilterCostRefused: a JMESPath filter whose work grows exponentially
// (issue 10: 3.9 s per 200-byte event in the group committer) is refused
// on create and update with a 422 that names the limit, and changes
// nothing.
func TestFilterCostRefused(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		sub := b.createSub(t, obj{"filter": obj{"jmespath": "type == 'order.created'"}})
		hostile := obj{"jmespath": "[data]" + strings.Repeat(".[@,@][]", 22)}

		for _, res := range []response{
			b.do(t, http.MethodPost, "/v1/subscriptions", obj{"url": "https://a.example", "filter": hostile}),
			b.do(t, http.MethodPatch, "/v1/subscriptions/"+sub.ID, obj{"filter": hostile}),
		} {
			e := requireError(t, res, http.StatusUnprocessableEntity, herald.CodeInvalidFilter, "filter.jmespath")
			require.Contains(t, e.Message, "expression refused")
			require.Contains(t, e.Message, "the limit is 1000")
		}
		got := ok[subscriptionJSON](t, b.do(t, http.MethodGet, "/v1/subscriptions/"+sub.ID, nil), http.StatusOK)
		require.Equal(t, "type == 'order.created'", got.Filter.JMESPath)
	})
}
