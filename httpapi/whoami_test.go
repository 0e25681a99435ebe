package httpapi

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

type whoamiJSON struct {
	TokenID string   `json:"token_id"`
	Scopes  []string `json:"scopes"`
	Tenant  string   `json:"tenant"`
	Admin   bool     `json:"admin"`
}

// TestWhoami: every valid token describes itself, whatever its scopes; no
// token gets 401.
func TestWhoami(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)

		admin := ok[whoamiJSON](t, b.do(t, http.MethodGet, "/v1/whoami", nil), http.StatusOK)
		require.Equal(t, whoamiJSON{Scopes: []string{"admin"}, Admin: true}, admin)

		reader := b.createToken(t, obj{"name": "reader", "scopes": []string{"subscriptions:read", "events:read"}})
		got := ok[whoamiJSON](t, b.do(t, http.MethodGet, "/v1/whoami", nil, withToken(reader.Token)), http.StatusOK)
		require.Equal(t, whoamiJSON{TokenID: reader.ID, Scopes: []string{"events:read", "subscriptions:read"}}, got)

		// A token with a single unrelated scope still gets in.
		pub := b.createToken(t, obj{"name": "publisher", "scopes": []string{"events:publish"}, "tenant": "acme"})
		got = ok[whoamiJSON](t, b.do(t, http.MethodGet, "/v1/whoami", nil, withToken(pub.Token)), http.StatusOK)
		require.Equal(t, whoamiJSON{TokenID: pub.ID, Scopes: []string{"events:publish"}, Tenant: "acme"}, got)

		requireError(t, b.do(t, http.MethodGet, "/v1/whoami", nil, withoutToken()), http.StatusUnauthorized, herald.CodeUnauthorized, "")
		requireError(t, b.do(t, http.MethodGet, "/v1/whoami", nil, withToken("hrld_nope")), http.StatusUnauthorized, herald.CodeUnauthorized, "")
		require.Equal(t, ScopeAnyToken, RouteScopes(b.handler)["GET /v1/whoami"])
	})
}
