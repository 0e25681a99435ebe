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

// NopObserver is the default Observer: it does nothing.
type NopObserver struct{}

// ObservePublish implements Observer.
func (NopObserver) ObservePublish(time.Duration, error) {}

// ObserveCommit implements Observer.
func (NopObserver) ObserveCommit(int, int, time.Duration, error) {}
