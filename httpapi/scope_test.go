package httpapi

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
)

// TestEveryRouteDeclaresAScope enumerates the router: every /v1 route has
// a valid scope (v1 panics on a missing one, so this also guards against
// a route mounted some other way).
func TestEveryRouteDeclaresAScope(t *testing.T) {
	t.Parallel()
	s := testdb.SQLite(t)
	h := New(Config{Store: s, Publisher: failingPublisher{}, Auth: NewTokenAuth(s, testToken), Push: nopBroadcaster{}})
	scopes := RouteScopes(h)
	n := 0
	for _, p := range Patterns(h) {
		if _, path, _ := strings.Cut(p, " "); strings.HasPrefix(path, "/v1/") {
			n++
			require.True(t, ValidRouteScope(string(scopes[p])), "route %s declares no valid scope", p)
		}
	}
	require.Equal(t, n, len(scopes))
	require.Greater(t, n, 20)
	require.Panics(t, func() {
		(&server{scopes: map[string]Scope{}}).v1("GET /v1/x", "", nil)
	})
}

// nopBroadcaster mounts the push broadcast routes.
type nopBroadcaster struct{}

func (nopBroadcaster) BroadcastPut(context.Context, string, string) error { return nil }
func (nopBroadcaster) BroadcastList(context.Context) (map[string]string, error) {
	return map[string]string{}, nil
}

func TestPrincipalHas(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		scopes []Scope
		want   Scope
		ok     bool
	}{
		{[]Scope{ScopeAdmin}, ScopeEventsPublish, true},
		{[]Scope{ScopeEventsPublish}, ScopeEventsPublish, true},
		{[]Scope{ScopeEventsPublish}, ScopeEventsRead, false},
		{nil, ScopeEventsRead, false},
		{[]Scope{ScopeSubscriptionsRead}, ScopeAdmin, false},
	} {
		require.Equal(t, tc.ok, (&Principal{Scopes: tc.scopes}).Has(tc.want), "%v has %s", tc.scopes, tc.want)
	}
}
