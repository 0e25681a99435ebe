package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/store"
)

// StatsCollector reads queue depth from the store on each scrape.
type StatsCollector struct {
	store store.Store
	tiers int
	now   func() time.Time

	pending, inFlight, due, oldest *prometheus.Desc
	held                           *prometheus.Desc
	dead, delivered, up            *prometheus.Desc
	throttled                      *prometheus.Desc
	skipped, superseded            *prometheus.Desc
}

// NewStatsCollector returns a collector for a store with the given number
// of tiers.
func NewStatsCollector(s store.Store, tiers int) *StatsCollector {
	l := []string{"tier"}
	return &StatsCollector{
		store:      s,
		tiers:      tiers,
		now:        time.Now,
		pending:    prometheus.NewDesc("herald_queue_pending", "Deliveries waiting in a tier (due or not).", l, nil),
		inFlight:   prometheus.NewDesc("herald_queue_in_flight", "Deliveries claimed under a lease.", l, nil),
		due:        prometheus.NewDesc("herald_queue_due", "Pending deliveries whose maturity has passed and that a claim can take now.", l, nil),
		held:       prometheus.NewDesc("herald_queue_held", "Pending deliveries whose maturity has passed that no claim can take now (subscription disabled, deleted, paused, or out of rate or in-flight budget).", l, nil),
		oldest:     prometheus.NewDesc("herald_queue_oldest_pending_age_seconds", "Age of the oldest due pending delivery.", l, nil),
		dead:       prometheus.NewDesc("herald_deliveries_dead", "Deliveries in the dead letters.", nil, nil),
		delivered:  prometheus.NewDesc("herald_deliveries_delivered_total", "Delivered outcomes, a running total kept by the store (survives restarts and retention).", nil, nil),
		up:         prometheus.NewDesc("herald_store_up", "1 when the last queue read from the store succeeded.", nil, nil),
		skipped:    prometheus.NewDesc("herald_deliveries_skipped", "Deliveries finished unsent: version not newer than the key's last delivered one (ordering latest).", nil, nil),
		superseded: prometheus.NewDesc("herald_deliveries_superseded", "Deliveries finished unsent: a newer version of the key was pending or in flight (ordering latest).", nil, nil),
		throttled:  prometheus.NewDesc("herald_queue_throttled", "Due pending deliveries of subscriptions out of budget (rate_limit, max_in_flight or a Retry-After pause).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *StatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.inFlight, c.due, c.held, c.oldest, c.dead, c.delivered, c.up, c.throttled, c.skipped, c.superseded} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *StatsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.store.StatsGet(ctx, &store.StatsGetParams{Tiers: c.tiers, Now: c.now().UTC()})
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, t := range st.Tiers {
		tier := strconv.Itoa(t.Tier)
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(t.Pending), tier)
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(t.InFlight), tier)
		ch <- prometheus.MustNewConstMetric(c.due, prometheus.GaugeValue, float64(t.Due), tier)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(t.Held), tier)
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, t.OldestPendingAge.Seconds(), tier)
	}
	ch <- prometheus.MustNewConstMetric(c.dead, prometheus.GaugeValue, float64(st.Dead))
	ch <- prometheus.MustNewConstMetric(c.throttled, prometheus.GaugeValue, float64(st.Throttled))
	ch <- prometheus.MustNewConstMetric(c.skipped, prometheus.GaugeValue, float64(st.Skipped))
	ch <- prometheus.MustNewConstMetric(c.superseded, prometheus.GaugeValue, float64(st.Superseded))
	ch <- prometheus.MustNewConstMetric(c.delivered, prometheus.CounterValue, float64(st.DeliveredTotal))
}
