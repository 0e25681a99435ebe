package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// The planner's picture of the queue. PostgreSQL estimates a table's rows
// as the density its last VACUUM or ANALYZE saw (rows per page) times the
// pages it has now. The active partition of deliveries empties after every
// burst while keeping its pages (the queue vacuum does not truncate it,
// vacuum.go), so the vacuum after a burst records a density of zero, and
// the next burst of 20,000 is planned as one row until the next ANALYZE:
// autovacuum's comes after a minute at the earliest (and never when it is
// off), the queue vacuum's after up to 10 s. Planned as one row, the
// claim found the ids it had locked by walking a whole index of the
// backlog (40–66 ms a claim), and a steady stream beside a burst waited
// 6–7 s for its deliveries (issue 28).
//
// So the store analyzes the partition itself when it grows: it counts the
// delivery rows it inserted less the outcomes it applied since its last
// ANALYZE, and once that exceeds growthAnalyzeMin and the rows that
// ANALYZE counted (the partition at least doubled), it runs ANALYZE
// deliveries_active in the background, one at a time. ANALYZE takes a
// lock that claims, publishes and completions do not conflict with, and
// reads at most 30,000 rows (the default statistics target): a few ms on
// a queue. At steady rates inserts and outcomes balance and nothing runs.
// Each node counts its own writes; any node's ANALYZE serves them all.
// The claim itself no longer depends on these statistics (claim.go,
// docs/adr/0030-plans-that-hold-on-stale-statistics.md); the rest of the
// statements do.

// growthAnalyzeMin is the least net growth (rows) that triggers an
// ANALYZE of the active partition.
const growthAnalyzeMin = 1000

// growthAnalyzeTimeout bounds one background ANALYZE.
const growthAnalyzeTimeout = 30 * time.Second

// growthAnalyzer is the Store's counter and its background ANALYZE.
type growthAnalyzer struct {
	// net is rows inserted less outcomes applied since the last ANALYZE
	// (which may be negative: outcomes of rows inserted before it).
	net atomic.Int64
	// counted is the rows the last ANALYZE found.
	counted atomic.Int64
	running atomic.Bool
	// off stops it (tests that need the statistics as they left them).
	off atomic.Bool
	// runs counts the ANALYZEs started (tests read it).
	runs   atomic.Int64
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (g *growthAnalyzer) init() {
	g.ctx, g.cancel = context.WithCancel(context.Background())
}

// close stops a running ANALYZE and waits for it.
func (g *growthAnalyzer) close() {
	g.cancel()
	g.wg.Wait()
}

// shrank counts n outcomes applied.
func (g *growthAnalyzer) shrank(n int) {
	if n > 0 {
		g.net.Add(int64(-n))
	}
}

// grew counts n delivery rows inserted and starts an ANALYZE when the
// partition grew enough since the last one.
func (s *Store) grew(n int) {
	g := &s.growth
	if n <= 0 {
		return
	}
	net := g.net.Add(int64(n))
	if net < growthAnalyzeMin || net < g.counted.Load() || g.off.Load() || g.ctx.Err() != nil {
		return
	}
	if !g.running.CompareAndSwap(false, true) {
		return
	}
	g.runs.Add(1)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer g.running.Store(false)
		ctx, cancel := context.WithTimeout(g.ctx, growthAnalyzeTimeout)
		defer cancel()
		// Counted from now: rows written while it runs may or may not be
		// in its sample, and count towards the next.
		g.net.Store(0)
		var rows float64
		_, err := s.pool.Exec(ctx, "ANALYZE deliveries_active")
		if err == nil {
			err = s.pool.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE oid = 'deliveries_active'::regclass").Scan(&rows)
		}
		if err != nil {
			// The queue vacuum analyzes it anyway within 10 s; try again
			// at the next growth.
			return
		}
		g.counted.Store(int64(rows))
	}()
}
