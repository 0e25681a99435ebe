package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/store"
)

// Observer turns ingest, delivery and maintenance measurements into
// Prometheus series. It implements ingest.Observer and delivery.Observer.
//
// Series:
//
//	herald_delivery_attempts_total{outcome,error_class}   attempts written (outcome: delivered, retry, dead, gone)
//	herald_deliveries_total{outcome}                      deliveries finished (delivered, dead; gone counts as dead)
//	herald_delivery_attempt_duration_seconds              request durations
//	herald_publish_duration_seconds                       time a publish call waited for its commit
//	herald_publish_to_delivery_seconds                    event created → delivered
//	herald_ingest_commit_batch_size                       events per ingest commit
//	herald_ingest_commit_duration_seconds                 ingest commit durations
//	herald_completion_batch_size                          outcomes per completion transaction
//	herald_completion_duration_seconds                    completion transaction durations
//	herald_claim_batch_size                               deliveries per claim transaction (0 included)
//	herald_direct_dispatch_total                          deliveries started without a claim (direct dispatch)
//	herald_queue_stale_alarms_total{tier}                 herald.queue.stale events raised
//	herald_retention_deleted_total{kind}                  rows deleted by retention (deliveries, dead, events, keys, subscriptions, secrets, attempts, push_messages, push_users)
//	herald_queue_vacuum_duration_seconds{result}          queue vacuums run by the leader (PostgreSQL; result: ok, error)
//	herald_tenant_events_total{tenant}                    tenanted events stored (tenant: one of WithTenants, else _other)
//	herald_tenant_deliveries_total{tenant,outcome}        tenanted deliveries finished (delivered, dead), labelled likewise
type Observer struct {
	attempts        *prometheus.CounterVec
	deliveries      *prometheus.CounterVec
	attemptDuration prometheus.Histogram
	publish         *prometheus.HistogramVec
	endToEnd        prometheus.Histogram
	commitSize      prometheus.Histogram
	commitDuration  prometheus.Histogram
	completeSize    prometheus.Histogram
	completeTook    prometheus.Histogram
	claimSize       prometheus.Histogram
	direct          prometheus.Counter
	staleAlarms     *prometheus.CounterVec
	retention       *prometheus.CounterVec
	vacuum          *prometheus.HistogramVec
	tenantEvents    *prometheus.CounterVec
	tenantDeliver   *prometheus.CounterVec
	systemDropped   *prometheus.CounterVec
	// tenants are the tenants with their own label value (WithTenants);
	// every other tenant is counted under OtherTenant, so the number of
	// series stays bounded whatever producers send.
	tenants map[string]bool
	// history, when set, also receives publish and attempt counts (the
	// dashboard's charts).
	history *History
}

// OtherTenant is the tenant label of tenants not in WithTenants' list.
const OtherTenant = "_other"

// WithTenants gives each of tenants its own label value in the per-tenant
// series (--metrics-tenants); it returns o. Call before serving.
func (o *Observer) WithTenants(tenants []string) *Observer {
	o.tenants = make(map[string]bool, len(tenants))
	for _, t := range tenants {
		o.tenants[t] = true
		o.tenantEvents.WithLabelValues(t)
	}
	return o
}

// tenantLabel is t's label value: t when allowed, OtherTenant otherwise.
func (o *Observer) tenantLabel(t string) string {
	if o.tenants[t] {
		return t
	}
	return OtherTenant
}

// ObserveTenantEvents implements ingest.TenantObserver.
func (o *Observer) ObserveTenantEvents(counts map[string]int) {
	for t, n := range counts {
		o.tenantEvents.WithLabelValues(o.tenantLabel(t)).Add(float64(n))
	}
}

// WithHistory makes o also feed h; it returns o.
func (o *Observer) WithHistory(h *History) *Observer {
	o.history = h
	return o
}

var (
	_ ingest.TenantObserver      = (*Observer)(nil)
	_ ingest.SystemEventObserver = (*Observer)(nil)
	_ ingest.Observer            = (*Observer)(nil)
	_ delivery.Observer          = (*Observer)(nil)
)

// batchBuckets fit group commits and completion batches (1 to 5,000).
var batchBuckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000}

// NewObserver creates the series and registers them on reg (the registry
// serve builds; no global registry).
func NewObserver(reg prometheus.Registerer) *Observer {
	o := &Observer{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_delivery_attempts_total",
			Help: "Delivery attempts written, by outcome (delivered, retry, dead, gone) and error class.",
		}, []string{"outcome", "error_class"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_deliveries_total",
			Help: "Deliveries finished by an attempt, by outcome (delivered, dead).",
		}, []string{"outcome"}),
		attemptDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "herald_delivery_attempt_duration_seconds",
			Help:    "Duration of delivery requests.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		publish: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "herald_publish_duration_seconds",
			Help:    "Time a publish call waited for its commit, by result (ok, error).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"result"}),
		endToEnd: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "herald_publish_to_delivery_seconds",
			Help:    "Time from an event's creation to a successful delivery of it (retries included).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600, 86400},
		}),
		commitSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "herald_ingest_commit_batch_size",
			Help:    "Events per ingest group commit.",
			Buckets: batchBuckets,
		}),
		commitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "herald_ingest_commit_duration_seconds",
			Help:    "Duration of ingest commits.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
		completeSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "herald_completion_batch_size",
			Help:    "Outcomes per delivery completion transaction.",
			Buckets: batchBuckets,
		}),
		completeTook: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "herald_completion_duration_seconds",
			Help:    "Duration of completion transactions (store retries included).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5},
		}),
		claimSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "herald_claim_batch_size",
			Help:    "Deliveries per claim transaction (empty claims included).",
			Buckets: append([]float64{0}, batchBuckets...),
		}),
		direct: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herald_direct_dispatch_total",
			Help: "Deliveries started by direct dispatch: inserted leased by the publishing commit, sent without a claim.",
		}),
		staleAlarms: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_queue_stale_alarms_total",
			Help: "herald.queue.stale events raised, by tier.",
		}, []string{"tier"}),
		retention: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_retention_deleted_total",
			Help: "Rows deleted by retention, by kind (deliveries, dead, events, keys, subscriptions, secrets, attempts, push_messages, push_users).",
		}, []string{"kind"}),
		vacuum: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "herald_queue_vacuum_duration_seconds",
			Help:    "Duration of the leader's vacuums of the queue tables (PostgreSQL), by result (ok, error).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"result"}),
		tenantEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_tenant_events_total",
			Help: "Tenanted events stored, by tenant (the tenants of --metrics-tenants; all others as _other).",
		}, []string{"tenant"}),
		tenantDeliver: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_tenant_deliveries_total",
			Help: "Deliveries of tenanted events finished, by tenant (as herald_tenant_events_total) and outcome (delivered, dead).",
		}, []string{"tenant", "outcome"}),
		systemDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_system_events_dropped_total",
			Help: "herald.* system events not stored because no subscription receives them, by type.",
		}, []string{"type"}),
	}
	reg.MustRegister(o.tenantEvents, o.tenantDeliver, o.systemDropped)
	for _, typ := range []string{herald.EventTypeDeliveryDead, herald.EventTypeSubscriptionDisabled, herald.EventTypeQueueStale} {
		o.systemDropped.WithLabelValues(typ)
	}
	o.tenantEvents.WithLabelValues(OtherTenant)
	reg.MustRegister(o.attempts, o.deliveries, o.attemptDuration, o.publish, o.endToEnd,
		o.commitSize, o.commitDuration, o.completeSize, o.completeTook, o.claimSize, o.direct, o.staleAlarms, o.retention, o.vacuum)
	// Pre-create the common series so they read 0 before the first event
	// (rate() over a series that appears late misses its first increment).
	o.attempts.WithLabelValues(delivery.OutcomeDelivered, "none")
	o.attempts.WithLabelValues(delivery.OutcomeRetry, string(herald.ErrorHTTPStatus))
	o.attempts.WithLabelValues(delivery.OutcomeDead, string(herald.ErrorHTTPStatus))
	o.attempts.WithLabelValues(delivery.OutcomeGone, string(herald.ErrorGone))
	o.deliveries.WithLabelValues("delivered")
	o.deliveries.WithLabelValues("dead")
	o.publish.WithLabelValues("ok")
	o.vacuum.WithLabelValues("ok")
	for _, k := range []string{"deliveries", "dead", "events", "keys", "subscriptions", "secrets", "attempts"} {
		o.retention.WithLabelValues(k)
	}
	return o
}

// errorClassLabel is the error_class label: "none" for a success,
// "unknown" for a failure without a class.
func errorClassLabel(outcome, class string) string {
	if class == "" && outcome != delivery.OutcomeDelivered {
		return "unknown"
	}
	if class == "" {
		return "none"
	}
	return class
}

// ObservePublish implements ingest.Observer.
func (o *Observer) ObservePublish(wait time.Duration, err error) {
	res := "ok"
	if err != nil {
		res = "error"
	}
	o.publish.WithLabelValues(res).Observe(wait.Seconds())
}

// ObserveCommit implements ingest.Observer.
func (o *Observer) ObserveCommit(events, _ int, took time.Duration, err error) {
	if err != nil {
		return
	}
	if o.history != nil {
		o.history.AddPublished(events)
	}
	o.commitSize.Observe(float64(events))
	o.commitDuration.Observe(took.Seconds())
}

// ObserveAttempt implements delivery.Observer.
func (o *Observer) ObserveAttempt(a *delivery.AttemptObservation) {
	o.attempts.WithLabelValues(a.Outcome, errorClassLabel(a.Outcome, string(a.ErrorClass))).Inc()
	o.attemptDuration.Observe(a.Duration.Seconds())
	if o.history != nil {
		o.history.ObserveAttempt(a)
	}
	if a.Stale {
		return // the state did not change: another node owns the delivery
	}
	switch a.Outcome {
	case delivery.OutcomeDelivered:
		o.deliveries.WithLabelValues("delivered").Inc()
		if a.Tenant != "" {
			o.tenantDeliver.WithLabelValues(o.tenantLabel(a.Tenant), "delivered").Inc()
		}
		if !a.EventCreatedAt.IsZero() {
			o.endToEnd.Observe(max(a.FinishedAt.Sub(a.EventCreatedAt), 0).Seconds())
		}
	case delivery.OutcomeDead, delivery.OutcomeGone:
		o.deliveries.WithLabelValues("dead").Inc()
		if a.Tenant != "" {
			o.tenantDeliver.WithLabelValues(o.tenantLabel(a.Tenant), "dead").Inc()
		}
	}
}

// ObserveClaim implements delivery.Observer.
func (o *Observer) ObserveClaim(claimed int) { o.claimSize.Observe(float64(claimed)) }

// ObserveDirect implements delivery.Observer.
func (o *Observer) ObserveDirect(n int) { o.direct.Add(float64(n)) }

// ObserveCompleteBatch implements delivery.Observer.
func (o *Observer) ObserveCompleteBatch(outcomes int, took time.Duration) {
	o.completeSize.Observe(float64(outcomes))
	o.completeTook.Observe(took.Seconds())
}

// ObserveSystemEventDropped implements ingest.SystemEventObserver. Only
// herald raises system events, so the type label has a handful of values.
func (o *Observer) ObserveSystemEventDropped(eventType string) {
	o.systemDropped.WithLabelValues(eventType).Inc()
}

// ObserveStaleAlarm counts one herald.queue.stale event for tier.
func (o *Observer) ObserveStaleAlarm(tier int) {
	o.staleAlarms.WithLabelValues(strconv.Itoa(tier)).Inc()
}

// ObserveVacuum records how long a queue vacuum took.
func (o *Observer) ObserveVacuum(d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	o.vacuum.WithLabelValues(result).Observe(d.Seconds())
}

// ObserveRetention counts rows a retention sweep deleted.
func (o *Observer) ObserveRetention(r *store.RetentionSweepResult) {
	o.retention.WithLabelValues("deliveries").Add(float64(r.Deliveries))
	o.retention.WithLabelValues("dead").Add(float64(r.Dead))
	o.retention.WithLabelValues("events").Add(float64(r.Events))
	o.retention.WithLabelValues("keys").Add(float64(r.Keys))
	o.retention.WithLabelValues("subscriptions").Add(float64(r.Subscriptions))
	o.retention.WithLabelValues("secrets").Add(float64(r.Secrets))
	o.retention.WithLabelValues("attempts").Add(float64(r.Attempts))
}

// ObservePushRetention counts what a Web Push sweep deleted
// (maintenance.PushRetentionObserver).
func (o *Observer) ObservePushRetention(r *store.PushRetentionSweepResult) {
	o.retention.WithLabelValues("push_messages").Add(float64(r.Messages))
	o.retention.WithLabelValues("push_users").Add(float64(r.Users))
}
