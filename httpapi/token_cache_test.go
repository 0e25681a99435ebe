package httpapi

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// tokenReads counts a store's token reads.
type tokenReads struct {
	store.Store
	n atomic.Int64
}

func (s *tokenReads) APITokenGet(ctx context.Context, hash string) (*store.APIToken, error) {
	s.n.Add(1)
	return s.Store.APITokenGet(ctx, hash)
}

// TestPublishTokenFromCache (ADR 0035): a node publishes with a token it
// read before without reading it again, and a token revoked on another
// node publishes nothing from its very next request, whatever that request
// is: a publish, an invalid one, a batch with nothing valid in it, or one
// on a route its scopes do not reach.
func TestPublishTokenFromCache(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		node1 := setup(t, s)
		reads := &tokenReads{Store: s}
		node2 := setup(t, reads)
		events := func() int {
			t.Helper()
			list := ok[listJSON[eventListItemJSON]](t, node1.do(t, http.MethodGet, "/v1/events?limit=200", nil), http.StatusOK)
			return len(list.Data)
		}
		publish := obj{"type": "order.created", "data": obj{"n": 1}}
		// cached returns a publishing token node 2 has read (once).
		cached := func(scopes ...string) tokenJSON {
			t.Helper()
			tok := node1.createToken(t, obj{"name": "p", "scopes": scopes})
			before := reads.n.Load()
			route := "/v1/events"
			if scopes[0] != "events:publish" {
				ok[listJSON[eventListItemJSON]](t, node2.do(t, http.MethodGet, route, nil, withToken(tok.Token)), http.StatusOK)
			} else {
				ok[publishJSON](t, node2.do(t, http.MethodPost, route, publish, withToken(tok.Token)), http.StatusAccepted)
			}
			require.Equal(t, before+1, reads.n.Load(), "the first request reads the token")
			return tok
		}
		revoke := func(tok tokenJSON) {
			t.Helper()
			require.Equal(t, http.StatusNoContent, node1.do(t, http.MethodDelete, "/v1/tokens/"+tok.ID, nil).code)
		}

		// Publishing again reads nothing; the single and batch routes share
		// the cache. A read route still reads.
		tok := cached("events:publish", "events:read")
		before := reads.n.Load()
		for range 3 {
			ok[publishJSON](t, node2.do(t, http.MethodPost, "/v1/events", publish, withToken(tok.Token)), http.StatusAccepted)
		}
		res := ok[batchJSON](t, node2.do(t, http.MethodPost, "/v1/events/batch", obj{"events": []obj{publish, publish}}, withToken(tok.Token)), http.StatusOK)
		require.Equal(t, batchAccepted, res.Results[1].Status)
		require.Equal(t, before, reads.n.Load(), "publishes with a token read before read it again")
		ok[listJSON[eventListItemJSON]](t, node2.do(t, http.MethodGet, "/v1/events", nil, withToken(tok.Token)), http.StatusOK)
		require.Equal(t, before+1, reads.n.Load(), "other routes read the token on every request")
		stored := events()
		require.Equal(t, 6, stored)

		// Revoked on node 1: node 2's next publish stores nothing and is
		// refused, and so is the one after.
		revoke(tok)
		for range 2 {
			requireError(t, node2.do(t, http.MethodPost, "/v1/events", publish, withToken(tok.Token)), http.StatusUnauthorized, herald.CodeUnauthorized, "")
		}
		tok = cached("events:publish")
		stored++
		revoke(tok)
		requireError(t, node2.do(t, http.MethodPost, "/v1/events/batch", obj{"events": []obj{publish}}, withToken(tok.Token)),
			http.StatusUnauthorized, herald.CodeUnauthorized, "")

		// An invalid publish, a batch with no valid item, a route the
		// token's scopes do not reach: 401, not what a valid token would
		// be told.
		tok = cached("events:publish")
		stored++
		revoke(tok)
		requireError(t, node2.do(t, http.MethodPost, "/v1/events", obj{"type": ""}, withToken(tok.Token)), http.StatusUnauthorized, herald.CodeUnauthorized, "")
		tok = cached("events:publish")
		stored++
		revoke(tok)
		requireError(t, node2.do(t, http.MethodPost, "/v1/events/batch", obj{"events": []obj{{"type": ""}}}, withToken(tok.Token)),
			http.StatusUnauthorized, herald.CodeUnauthorized, "")
		tok = cached("events:read")
		revoke(tok)
		requireError(t, node2.do(t, http.MethodPost, "/v1/events", publish, withToken(tok.Token)), http.StatusUnauthorized, herald.CodeUnauthorized, "")
		require.Equal(t, stored, events(), "a revoked token stored nothing")

		// While valid, the same requests are told what is wrong.
		tok = cached("events:publish")
		requireError(t, node2.do(t, http.MethodPost, "/v1/events", obj{"type": ""}, withToken(tok.Token)), http.StatusBadRequest, herald.CodeMissingField, "type")
		reader := cached("events:read")
		requireError(t, node2.do(t, http.MethodPost, "/v1/events", publish, withToken(reader.Token)), http.StatusForbidden, herald.CodeForbidden, "")
	})
}
