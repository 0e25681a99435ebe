package ingest

import (
	"sync"
	"time"
)

// smallRequest is the size below which a request takes the small lane:
// single publishes and batch calls of a few events.
const smallRequest = busyGroup

// lane is one queue of publish requests with its own committers
// (Config.Committers each) and its own group-commit rhythm.
//
// There are two: requests of fewer than smallRequest events, and larger
// ones. In one queue, a single publish that arrived during an import was
// gathered with up to MaxBatch events of it and waited for that whole
// commit: a burst of 20,000 events through the batch API beside a steady
// 1,000/s of single publishes raised the singles' publish-call p99 from
// about 20 ms to 260 ms on a two-core machine (issue 28,
// docs/benchmarks.md). Apart, a single publish waits at most for a commit
// already running on the store (SQLite's one writer), never for a group
// it was not part of.
type lane struct {
	reqs chan *request
	// gathering is held by the committer gathering the lane's next group,
	// from its wait for a first request until the group is complete; it
	// commits after letting go, so one committer's commit overlaps the
	// next one's gathering, but two never gather at once. Gathering side
	// by side, each took every other publish: at 1,000 events/s the
	// steady wait (SteadyWait) was defeated — the other committer took
	// the events it waited for — and each committer's own groups came
	// twice as far apart as the flow's, too far to count as steady
	// (docs/benchmarks.md, "Issue 26", 2026-12-02). last and prev are the
	// lane's, read and written only under gathering: the size of the
	// previous group commit and when its first event came.
	gathering sync.Mutex
	last      int
	prev      time.Time
}

func newLane(cfg Config) *lane {
	return &lane{reqs: make(chan *request, cfg.MaxBatch*cfg.Committers)}
}

// laneOf is the lane r queues in.
func (i *Ingester) laneOf(r *request) *lane {
	if len(r.evs) < smallRequest {
		return i.lanes[0]
	}
	return i.lanes[1]
}
