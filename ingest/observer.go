package ingest

import "time"

// Observer receives ingest measurements. Package metrics implements it for
// Prometheus; ingest itself depends on no metrics library. Methods are
// called synchronously on the publish path and must be cheap.
type Observer interface {
	// ObservePublish is called when a publish call (PublishOne or
	// PublishMany) returns, with how long it waited for its commit.
	ObservePublish(wait time.Duration, err error)
	// ObserveCommit is called after each group commit (or batch API
	// commit) with its number of events and deliveries and its duration.
	ObserveCommit(events, deliveries int, took time.Duration, err error)
}

// TenantObserver is implemented by Observers that count events per tenant
// (metrics.Observer). It is called after each successful commit with the
// number of events stored per tenant (untenanted events are left out),
// only when some event of the commit had a tenant.
type TenantObserver interface {
	ObserveTenantEvents(counts map[string]int)
}

// NopObserver is the default Observer: it does nothing.
type NopObserver struct{}

// ObservePublish implements Observer.
func (NopObserver) ObservePublish(time.Duration, error) {}

// ObserveCommit implements Observer.
func (NopObserver) ObserveCommit(int, int, time.Duration, error) {}
