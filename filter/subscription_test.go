package filter

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// TestDelivers covers the fan-out's rule one clause at a time.
func TestDelivers(t *testing.T) {
	t.Parallel()
	m, err := Compile(&herald.Filter{CEL: "data.n > 1"})
	require.NoError(t, err)
	sub := &herald.Subscription{EventTypes: []string{"order.*"}}
	audit := &herald.Subscription{AllTenants: true, EventTypes: []string{"herald.*", "*"}}
	acme := &herald.Subscription{Tenant: "acme"}
	ev := func(typ, tenant string, n int) *herald.Event {
		return &herald.Event{Type: typ, Tenant: tenant, Data: json.RawMessage(`{"n":` + string(rune('0'+n)) + `}`)}
	}
	for _, c := range []struct {
		name       string
		sub        *herald.Subscription
		wantSystem bool
		m          Matcher
		ev         *herald.Event
		want       bool
	}{
		{"type and filter match", sub, false, m, ev("order.created", "", 2), true},
		{"filter refuses", sub, false, m, ev("order.created", "", 1), false},
		{"type refuses", sub, false, m, ev("user.created", "", 2), false},
		{"no filter", sub, false, nil, ev("order.created", "", 1), true},
		{"untenanted sub, tenanted event", sub, false, nil, ev("order.created", "acme", 2), false},
		{"tenant sub, its tenant", acme, false, nil, ev("x", "acme", 0), true},
		{"tenant sub, another tenant", acme, false, nil, ev("x", "globex", 0), false},
		{"tenant sub, untenanted event", acme, false, nil, ev("x", "", 0), false},
		{"all tenants", audit, true, nil, ev("x", "globex", 0), true},
		{"system event, wanted", audit, true, nil, ev("herald.delivery.dead", "", 0), true},
		{"system event, not wanted", sub, false, nil, ev("herald.delivery.dead", "", 0), false},
	} {
		var in *Input
		require.Equal(t, c.want, Delivers(c.sub, c.wantSystem, c.m, c.ev, &in), c.name)
	}
	// The input is built once, on first need, and kept.
	var in *Input
	e := ev("order.created", "", 2)
	require.True(t, Delivers(sub, false, m, e, &in))
	require.NotNil(t, in)
	kept := in
	require.True(t, Delivers(sub, false, m, e, &in))
	require.Same(t, kept, in)
}
