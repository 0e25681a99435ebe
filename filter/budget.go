package filter

import "sync/atomic"

// Every filter evaluation runs under a work budget (CELCostLimit,
// JMESPathCostLimit, ESQueryCostLimit): one that would exceed it stops, or
// does not start, and the event does not match that subscription. The
// evaluations cut short are counted here, per language, for the metrics.
var costLimitHits struct {
	cel, jmespath, esQuery atomic.Uint64
}

// CostLimitHits returns how many evaluations, since the process started,
// ended as "no match" because the filter reached its work budget, keyed by
// language: "cel", "jmespath" and "es_query" (the herald.Filter JSON keys).
func CostLimitHits() map[string]uint64 {
	return map[string]uint64{
		"cel":      costLimitHits.cel.Load(),
		"jmespath": costLimitHits.jmespath.Load(),
		"es_query": costLimitHits.esQuery.Load(),
	}
}
