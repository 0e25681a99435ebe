package main

import (
	"time"

	"github.com/heraldhq/herald/httpapi"
	"github.com/heraldhq/herald/metrics"
)

// historyView serves metrics.History to httpapi, which does not import
// metrics (the rule is in .golangci.yml, httpapi-no-metrics).
type historyView struct{ h *metrics.History }

var _ httpapi.History = historyView{}

func (historyView) Interval() time.Duration { return metrics.HistoryInterval }

// Started is when the process's history began.
func (v historyView) Started() time.Time { return v.h.Started() }

// Points converts field for field: the conversion compiles only while the
// two point types keep the same fields.
func (v historyView) Points() []httpapi.HistoryPoint {
	pts := v.h.Points()
	out := make([]httpapi.HistoryPoint, len(pts))
	for i, p := range pts {
		out[i] = httpapi.HistoryPoint(p)
	}
	return out
}
