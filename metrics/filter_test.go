package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/filter"
	"github.com/heraldhq/herald/metrics"
)

func TestFilterCollector(t *testing.T) {
	t.Parallel()

	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewFilterCollector())
	before := value(t, gather(t, reg), "herald_filter_cost_limit_total", map[string]string{"language": "jmespath"})

	// An accepted expression whose bound exceeds the limit on a large event.
	m, err := filter.Compile(&herald.Filter{JMESPath: "[data]" + strings.Repeat(".[@,@][]", 3)})
	require.NoError(t, err)
	ev := &herald.Event{Type: "t", Data: []byte(`{"s": "` + strings.Repeat("x", filter.JMESPathCostLimit) + `"}`)}
	require.False(t, m.Match(filter.NewInput(ev)))

	fams := gather(t, reg)
	require.Greater(t, value(t, fams, "herald_filter_cost_limit_total", map[string]string{"language": "jmespath"}), before)
	for _, lang := range []string{"cel", "es_query"} {
		value(t, fams, "herald_filter_cost_limit_total", map[string]string{"language": lang})
	}
}
