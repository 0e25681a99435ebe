package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/store"
)

// queueTables are the tables every claim and completion updates: the active
// partition of deliveries (migration 005), the per-key state of ordered
// subscriptions, the throttle's start log, and the delivered counter. Each
// stays small, so vacuuming them takes milliseconds.
var queueTables = []string{"deliveries_active", "delivery_keys", "throttle_starts", "delivered_counter"}

// archiveTables are the tables retention deletes from. The server's
// autovacuum looks after them when it runs; QueueVacuum cleans them only
// when it does not.
var archiveTables = []string{"deliveries_done", "attempts", "events"}

// QueueVacuum runs VACUUM (ANALYZE) on the queue tables, or, with
// params.Archive, on the archive tables when the server's autovacuum is off
// (nothing when it is on).
//
// Why herald does this itself: autovacuum's defaults (wake once a minute
// per database, vacuum after 20% of a table changed) suit tables whose
// size is their content, not a queue whose every row is rewritten twice in
// its short life. At 1,000 deliveries/s the active partition collects
// ~120,000 dead row versions a minute while holding a few hundred live
// ones, and a server with autovacuum off never cleans them: claims then
// walk ever longer index ranges of dead entries (measured: p99 rose from
// 68 to 600–820 ms in ten minutes). ANALYZE keeps the planner's picture of
// the queue current for the same reason.
func (s *Store) QueueVacuum(ctx context.Context, params *store.QueueVacuumParams) (*store.QueueVacuumResult, error) {
	const op = "error vacuuming the queue"
	if s.closed.Load() {
		return nil, unavailable(op, errors.New("store closed"))
	}
	tables := queueTables
	if params.Archive {
		var on bool
		if err := s.pool.QueryRow(ctx, "SELECT current_setting('autovacuum')::bool").Scan(&on); err != nil {
			return nil, mapErr(op, err)
		}
		tables = archiveTables
		if on {
			tables = nil
		}
	}
	res := &store.QueueVacuumResult{Tables: []string{}}
	for _, t := range tables {
		// One table per statement: VACUUM cannot run in a transaction, and
		// each statement's locks (SHARE UPDATE EXCLUSIVE, which claims and
		// completions do not conflict with) are held only for its table.
		// SKIP_LOCKED: a table another VACUUM is already cleaning is left
		// to it. TRUNCATE false: giving the empty pages at a table's end
		// back takes an ACCESS EXCLUSIVE lock that every claim, publish
		// and completion queues behind (measured: the rate phase of
		// `herald bench --phases` on a node that had worked five runs
		// reached a 104 ms second, with the wait event
		// Timeout:VacuumTruncate sampled; issue 28). A queue table
		// empties after every burst, and the next one reuses the pages.
		if _, err := s.pool.Exec(ctx, "VACUUM (ANALYZE, SKIP_LOCKED, TRUNCATE false) "+pgx.Identifier{t}.Sanitize()); err != nil {
			return res, mapErr(op, err)
		}
		res.Tables = append(res.Tables, t)
	}
	return res, nil
}
