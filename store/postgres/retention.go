package postgres

import (
	"context"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// defaultRetentionBatch is the rows deleted per transaction when the params
// leave BatchSize at 0 (River's cleaner found ~1 s per 1,000-row batch on a
// busy table; smaller batches keep locks and WAL bursts short).
const defaultRetentionBatch = 1000

// sweepDeliveriesSQL deletes one batch of deliveries in the given states
// last updated before $2, with their attempts, in one statement. The
// predicate "state NOT IN ('pending', 'in_flight')" matches the partial
// index deliveries_finished_idx (migration 004). FOR UPDATE SKIP LOCKED
// leaves rows another transaction holds (a retry, a redrive) alone, and
// READ COMMITTED re-checks the state of a row that changed meanwhile, so a
// delivery put back in the queue is never deleted.
const sweepDeliveriesSQL = `
WITH victims AS (
	SELECT id FROM deliveries
	WHERE state NOT IN ('pending', 'in_flight') AND state = ANY($1) AND updated_at < $2
	ORDER BY state, updated_at
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), gone AS (
	-- "= ANY (ARRAY(…))": a primary-key lookup per victim. Written as a
	-- join, the planner sorted every finished delivery of the states (and
	-- every attempt) for a merge join, once a minute, even when nothing
	-- was due: 0.3–0.9 s at 300,000 finished rows, growing with retention.
	DELETE FROM deliveries d
	WHERE d.id = ANY (ARRAY(SELECT id FROM victims)) AND d.state = ANY($1)
	RETURNING d.id
), att AS (
	DELETE FROM attempts a WHERE a.delivery_id = ANY (ARRAY(SELECT id FROM gone))
)
SELECT count(*) FROM gone`

// sweepEventsSQL deletes one batch of events created before $1 that have no
// delivery left.
const sweepEventsSQL = `
WITH victims AS (
	SELECT e.id FROM events e
	WHERE e.created_at < $1
	  -- A probe of deliveries_event_idx per old event (a scalar subquery
	  -- with LIMIT, never an anti-join hashing every delivery).
	  AND (SELECT 1 FROM deliveries d WHERE d.event_id = e.id LIMIT 1) IS NULL
	ORDER BY e.created_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), gone AS (
	DELETE FROM events e WHERE e.id = ANY (ARRAY(SELECT id FROM victims)) RETURNING 1
)
SELECT count(*) FROM gone`

// RetentionSweep deletes what retention no longer keeps, one short
// transaction (one statement) per batch.
func (s *Store) RetentionSweep(ctx context.Context, params *store.RetentionSweepParams) (*store.RetentionSweepResult, error) {
	const op = "error sweeping retention"
	batch := params.BatchSize
	if batch <= 0 {
		batch = defaultRetentionBatch
	}
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	res := &store.RetentionSweepResult{}
	loop := func(sql string, args func() []any, count *int) error {
		for {
			var n int
			if err := retryMoved(ctx, func() error { return db.QueryRow(ctx, sql, args()...).Scan(&n) }); err != nil {
				return mapErr(op, err)
			}
			*count += n
			if n < batch {
				return nil
			}
		}
	}
	finished := make([]string, len(store.RetentionStates))
	for i, st := range store.RetentionStates {
		finished[i] = string(st)
	}
	if params.Delivered > 0 {
		cutoff := ms(params.Now.Add(-params.Delivered))
		if err := loop(sweepDeliveriesSQL, func() []any { return []any{finished, cutoff, batch} }, &res.Deliveries); err != nil {
			return res, err
		}
	}
	if params.Dead > 0 {
		cutoff := ms(params.Now.Add(-params.Dead))
		dead := []string{string(herald.DeliveryDead)}
		if err := loop(sweepDeliveriesSQL, func() []any { return []any{dead, cutoff, batch} }, &res.Dead); err != nil {
			return res, err
		}
	}
	if params.Events > 0 {
		cutoff := ms(params.Now.Add(-params.Events))
		if err := loop(sweepEventsSQL, func() []any { return []any{cutoff, batch} }, &res.Events); err != nil {
			return res, err
		}
	}
	return res, nil
}
