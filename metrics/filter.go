package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/filter"
)

// FilterCollector exports filter.CostLimitHits:
//
//	herald_filter_cost_limit_total{language}   filter evaluations stopped by their work budget (no match)
//
// A filter that reaches its budget (CELCostLimit, JMESPathCostLimit,
// ESQueryCostLimit) on an event does not match it; this counter is where
// that shows. The counts live in the filter package, which knows no
// registry, and are read at scrape time.
type FilterCollector struct {
	hits *prometheus.Desc
}

// NewFilterCollector returns the collector; register it once per registry.
func NewFilterCollector() *FilterCollector {
	return &FilterCollector{
		hits: prometheus.NewDesc("herald_filter_cost_limit_total",
			"Filter evaluations that reached their work budget and did not match, by language (cel, jmespath, es_query).",
			[]string{"language"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *FilterCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.hits }

// Collect implements prometheus.Collector.
func (c *FilterCollector) Collect(ch chan<- prometheus.Metric) {
	for lang, n := range filter.CostLimitHits() {
		ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(n), lang)
	}
}
