package herald

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidTenant(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"acme", true},
		{"Acme-1.eu_west", true},
		{strings.Repeat("a", MaxTenantLen), true},
		{"", false},
		{strings.Repeat("a", MaxTenantLen+1), false},
		{"a b", false},
		{"a/b", false},
		{"é", false},
	} {
		require.Equal(t, tc.want, ValidTenant(tc.in), "%q", tc.in)
	}
}

func TestSubscriptionReceives(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sub    Subscription
		tenant string
		want   bool
	}{
		{Subscription{}, "", true},
		{Subscription{}, "a", false},
		{Subscription{AllTenants: true}, "a", true},
		{Subscription{AllTenants: true}, "", true},
		{Subscription{Tenant: "a"}, "a", true},
		{Subscription{Tenant: "a"}, "b", false},
		{Subscription{Tenant: "a"}, "", false},
	} {
		require.Equal(t, tc.want, tc.sub.Receives(tc.tenant), "%+v %q", tc.sub, tc.tenant)
	}
}

func TestEventBodyTenant(t *testing.T) {
	t.Parallel()
	ev := &Event{ID: "evt_1", Type: "a", Tenant: "acme"}
	require.Contains(t, string(ev.Body()), `"tenant":"acme"`)
	require.Equal(t, "acme", ev.Envelope()["tenant"])
	ev.Tenant = ""
	require.NotContains(t, string(ev.Body()), "tenant")
	require.NotContains(t, ev.Envelope(), "tenant")
}
