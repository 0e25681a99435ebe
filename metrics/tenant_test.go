package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/delivery"
)

// Per-tenant series: tenants of the allow-list get their own label value,
// all others share _other, so producers cannot grow the series count.
func TestTenantSeriesBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	o := NewObserver(reg).WithTenants([]string{"acme"})
	o.ObserveTenantEvents(map[string]int{"acme": 2, "globex": 1, "initech": 4})
	for i := range 100 {
		o.ObserveTenantEvents(map[string]int{"t" + strings.Repeat("x", i): 1})
	}
	o.ObserveAttempt(&delivery.AttemptObservation{Outcome: delivery.OutcomeDelivered, Tenant: "acme"})
	o.ObserveAttempt(&delivery.AttemptObservation{Outcome: delivery.OutcomeDead, Tenant: "globex"})
	o.ObserveAttempt(&delivery.AttemptObservation{Outcome: delivery.OutcomeDelivered})

	require.InDelta(t, 2, testutil.ToFloat64(o.tenantEvents.WithLabelValues("acme")), 0)
	require.InDelta(t, 105, testutil.ToFloat64(o.tenantEvents.WithLabelValues(OtherTenant)), 0)
	require.Equal(t, 2, testutil.CollectAndCount(o.tenantEvents))
	require.InDelta(t, 1, testutil.ToFloat64(o.tenantDeliver.WithLabelValues("acme", "delivered")), 0)
	require.InDelta(t, 1, testutil.ToFloat64(o.tenantDeliver.WithLabelValues(OtherTenant, "dead")), 0)
	require.Equal(t, 2, testutil.CollectAndCount(o.tenantDeliver), "untenanted deliveries are not counted per tenant")
}
