package metrics

import "github.com/prometheus/client_golang/prometheus"

// SourceObserver counts what broker sources consume (source.Observer).
type SourceObserver struct {
	consumed   *prometheus.CounterVec
	duplicates *prometheus.CounterVec
	rejected   *prometheus.CounterVec
}

// NewSourceObserver registers the source counters on reg.
func NewSourceObserver(reg prometheus.Registerer) *SourceObserver {
	o := &SourceObserver{
		consumed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_source_consumed_total",
			Help: "Broker messages that became stored events (duplicates included) and were acknowledged, by source.",
		}, []string{"source"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_source_duplicates_total",
			Help: "Broker messages whose event already existed (a redelivery or a repeated id), by source.",
		}, []string{"source"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_source_rejected_total",
			Help: "Broker messages rejected without requeue because they cannot become events, by source and reason.",
		}, []string{"source", "reason"}),
	}
	reg.MustRegister(o.consumed, o.duplicates, o.rejected)
	return o
}

// ObserveSourceConsumed implements source.Observer.
func (o *SourceObserver) ObserveSourceConsumed(source string, stored, duplicates int) {
	o.consumed.WithLabelValues(source).Add(float64(stored))
	if duplicates > 0 {
		o.duplicates.WithLabelValues(source).Add(float64(duplicates))
	}
}

// ObserveSourceRejected implements source.Observer.
func (o *SourceObserver) ObserveSourceRejected(source, reason string) {
	o.rejected.WithLabelValues(source, reason).Inc()
}
