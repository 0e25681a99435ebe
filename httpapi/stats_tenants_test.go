package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

type tenantStatsListJSON struct {
	Since string            `json:"since"`
	Data  []tenantStatsJSON `json:"data"`
	Other *tenantStatsJSON  `json:"other"`
}

func TestTenantStats(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		for _, tenant := range []string{"acme", "acme", "globex", "initech", ""} {
			body := obj{"url": "https://example.com/" + tenant, "event_types": []string{"order.*"}}
			if tenant != "" {
				body["tenant"] = tenant
			}
			b.createSub(t, body)
		}
		// acme: 2 events x 2 subscriptions pending; globex: 1 dead;
		// untenanted: 1 pending; initech: nothing.
		for range 2 {
			b.publish(t, obj{"type": "order.created", "tenant": "acme", "data": obj{}})
		}
		dead := b.publish(t, obj{"type": "order.created", "tenant": "globex", "data": obj{}})
		var ids []string
		for _, d := range b.deliveriesOf(t, dead.ID) {
			ids = append(ids, d.ID)
		}
		b.killDeliveries(t, ids, time.Now().UTC())
		b.publish(t, obj{"type": "order.created", "data": obj{}})

		res := ok[tenantStatsListJSON](t, b.do(t, http.MethodGet, "/v1/stats/tenants", nil), http.StatusOK)
		require.Nil(t, res.Other)
		require.Len(t, res.Data, 4)
		byName := map[string]tenantStatsJSON{}
		for _, ts := range res.Data {
			name := "-"
			if ts.Tenant != nil {
				name = *ts.Tenant
			}
			byName[name] = ts
		}
		require.Equal(t, 2, byName["acme"].Subscriptions)
		require.Equal(t, 4, byName["acme"].Pending+byName["acme"].InFlight)
		require.Equal(t, 1, byName["globex"].Dead)
		require.Equal(t, 0.0, *byName["globex"].SuccessRate)
		require.Equal(t, 1, byName["-"].Pending+byName["-"].InFlight)
		require.Equal(t, 1, byName["initech"].Subscriptions)
		require.Nil(t, byName["initech"].SuccessRate)
		// The most queued work first, then the most dead.
		require.Equal(t, "acme", *res.Data[0].Tenant)

		// Beyond limit, the rest is summed into other.
		res = ok[tenantStatsListJSON](t, b.do(t, http.MethodGet, "/v1/stats/tenants?limit=2", nil), http.StatusOK)
		require.Len(t, res.Data, 2)
		require.NotNil(t, res.Other)
		require.Nil(t, res.Other.Tenant)
		total := res.Other.Subscriptions
		for _, ts := range res.Data {
			total += ts.Subscriptions
		}
		require.Equal(t, 5, total)

		requireError(t, b.do(t, http.MethodGet, "/v1/stats/tenants?limit=0", nil), http.StatusBadRequest, herald.CodeInvalidField, "limit")
		// Admin only: a tenant's token, even with every other scope, is refused.
		tok := b.createToken(t, obj{"name": "acme", "tenant": "acme", "scopes": allScopesButAdmin})
		requireError(t, b.do(t, http.MethodGet, "/v1/stats/tenants", nil, withToken(tok.Token)), http.StatusForbidden, herald.CodeForbidden, "")
	})
}
