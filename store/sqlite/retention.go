package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// defaultRetentionBatch is the rows deleted per transaction when the params
// leave BatchSize at 0.
const defaultRetentionBatch = 1000

// finishedPredicate must appear verbatim in a query for SQLite to use the
// partial index deliveries_finished (migration 004).
const finishedPredicate = "state NOT IN ('pending', 'in_flight')"

// RetentionSweep deletes finished deliveries, dead letters and events past
// their retention, in write transactions of at most BatchSize rows each, so
// the single writer is never held long.
func (s *Store) RetentionSweep(ctx context.Context, params *store.RetentionSweepParams) (*store.RetentionSweepResult, error) {
	batch := params.BatchSize
	if batch <= 0 {
		batch = defaultRetentionBatch
	}
	res := &store.RetentionSweepResult{}
	finished := make([]string, len(store.RetentionStates))
	for i, st := range store.RetentionStates {
		finished[i] = string(st)
	}
	if params.Delivered > 0 {
		n, err := s.sweepDeliveries(ctx, finished, ms(params.Now.Add(-params.Delivered)), batch)
		res.Deliveries = n
		if err != nil {
			return res, err
		}
	}
	if params.Dead > 0 {
		n, err := s.sweepDeliveries(ctx, []string{string(herald.DeliveryDead)}, ms(params.Now.Add(-params.Dead)), batch)
		res.Dead = n
		if err != nil {
			return res, err
		}
	}
	if params.Events > 0 {
		cutoff := ms(params.Now.Add(-params.Events))
		for {
			var n int64
			err := s.queueTx(ctx, "retention: events", func(tx *sql.Tx) error {
				r, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id IN (
					SELECT e.id FROM events e
					WHERE e.created_at < ?
					  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id)
					ORDER BY e.created_at LIMIT ?)`, cutoff, batch)
				if err != nil {
					return err
				}
				n, err = r.RowsAffected()
				return err
			})
			if err != nil {
				return res, err
			}
			res.Events += int(n)
			if int(n) < batch {
				break
			}
		}
	}
	return res, nil
}

// sweepDeliveries deletes deliveries in states last updated before cutoff,
// with their attempts, batch by batch, and returns how many.
func (s *Store) sweepDeliveries(ctx context.Context, states []string, cutoff int64, batch int) (int, error) {
	total := 0
	for {
		var n int
		err := s.queueTx(ctx, "retention: deliveries", func(tx *sql.Tx) error {
			args := append(anySlice(states), cutoff, batch)
			rows, err := tx.QueryContext(ctx, `SELECT id FROM deliveries
				WHERE `+finishedPredicate+` AND state IN (`+placeholders(len(states))+`) AND updated_at < ?
				ORDER BY state, updated_at LIMIT ?`, args...)
			if err != nil {
				return err
			}
			var ids []string
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return err
				}
				ids = append(ids, id)
			}
			if err := rows.Close(); err != nil {
				return err
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if len(ids) == 0 {
				return nil
			}
			list, err := json.Marshal(ids)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM attempts
				WHERE delivery_id IN (SELECT value FROM json_each(?))`, string(list)); err != nil {
				return err
			}
			// The state is checked again: nothing else writes inside this
			// transaction, but the guard keeps the rule local.
			r, err := tx.ExecContext(ctx, `DELETE FROM deliveries
				WHERE id IN (SELECT value FROM json_each(?)) AND state IN (`+placeholders(len(states))+`)`,
				append([]any{string(list)}, anySlice(states)...)...)
			if err != nil {
				return err
			}
			deleted, err := r.RowsAffected()
			n = int(deleted)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < batch {
			return total, nil
		}
	}
}

// LeaderAttempt always succeeds: a SQLite data directory has one node.
func (s *Store) LeaderAttempt(ctx context.Context) (bool, error) { return true, nil }

// LeaderRelease has nothing to give up.
func (s *Store) LeaderRelease(ctx context.Context) error { return nil }
