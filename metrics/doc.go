// Package metrics exposes herald's queue health in Prometheus form.
//
// Queue gauges are read from the store at scrape time (one StatsGet per
// scrape, bounded by a 5 s timeout), so every node reports the shared queue
// as the store sees it; a failed read is reported through
// herald_store_up 0 rather than stale numbers.
package metrics
