package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/heraldhq/herald/store"
)

// StatsGet counts deliveries per tier and state. The pending and in-flight
// counts read only the partial indexes (the queue, not the history); the
// delivered total is a counter, so it costs nothing and survives retention.
func (s *Store) StatsGet(ctx context.Context, params *store.StatsGetParams) (*store.Stats, error) {
	now := ms(params.Now)
	st := &store.Stats{Tiers: make([]store.TierStats, params.Tiers)}
	for i := range st.Tiers {
		st.Tiers[i].Tier = i
	}
	err := s.readTx(ctx, "stats get", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT tier, COUNT(*), COALESCE(SUM(next_attempt_at <= ?), 0),
			MIN(CASE WHEN next_attempt_at <= ? THEN next_attempt_at END)
			FROM deliveries WHERE state = 'pending' GROUP BY tier`, now, now)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				tier         int
				pending, due int64
				oldest       sql.NullInt64
			)
			if err := rows.Scan(&tier, &pending, &due, &oldest); err != nil {
				return err
			}
			if tier < 0 || tier >= len(st.Tiers) {
				continue
			}
			t := &st.Tiers[tier]
			t.Pending, t.Due = pending, due
			if oldest.Valid && oldest.Int64 < now {
				t.OldestPendingAge = time.Duration(now-oldest.Int64) * time.Millisecond
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT tier, COUNT(*) FROM deliveries WHERE state = 'in_flight' GROUP BY tier`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				tier int
				n    int64
			)
			if err := rows.Scan(&tier, &n); err != nil {
				return err
			}
			if tier >= 0 && tier < len(st.Tiers) {
				st.Tiers[tier].InFlight = n
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// Skipped and superseded (ordering "latest"): partial index
		// deliveries_unsent (002_ordering.sql).
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(state = 'skipped'), 0), COALESCE(SUM(state = 'superseded'), 0)
			FROM deliveries WHERE state IN ('skipped', 'superseded')`).Scan(&st.Skipped, &st.Superseded); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM deliveries WHERE state = 'dead'`).Scan(&st.Dead); err != nil {
			return err
		}
		if st.Throttled, err = throttledCount(ctx, tx, params.Tiers, now); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'delivered_total'`).Scan(&st.DeliveredTotal)
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}
