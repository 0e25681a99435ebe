package sqlite

import (
	"context"
	"database/sql"
	"math"
	"time"

	"github.com/heraldhq/herald/store"
)

// StatsGet counts the queue per tier and reads the counters. The pending
// and in-flight counts read only the partial indexes (the queue, not the
// history); dead, skipped and superseded are kept by triggers (migration
// 007) and the delivered total by completions, so nothing here grows with
// the history retention keeps.
func (s *Store) StatsGet(ctx context.Context, params *store.StatsGetParams) (*store.Stats, error) {
	now := ms(params.Now)
	st := store.NewStats(params.Tiers)
	err := s.readTx(ctx, "stats get", func(tx queryer) error {
		if err := statsPending(ctx, tx, st, now); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT tier, COUNT(*) FROM deliveries WHERE state = 'in_flight' GROUP BY tier`)
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
			if tier >= 0 {
				st.Tier(tier).InFlight = n
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT state, n FROM delivery_counts`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				state string
				n     int64
			)
			if err := rows.Scan(&state, &n); err != nil {
				return err
			}
			switch state {
			case "dead":
				st.Dead = n
			case "skipped":
				st.Skipped = n
			case "superseded":
				st.Superseded = n
			}
		}
		if err := rows.Err(); err != nil {
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

// subTierDue is one subscription's due pending deliveries in one tier.
type subTierDue struct {
	tier   int
	sub    string
	due    int64
	oldest int64
}

// statsPending fills Pending, Due, Held and OldestPendingAge: it counts the
// pending deliveries per tier and subscription, then splits each
// subscription's due ones into claimable and held (store.TierStats): not
// live (disabled, deleted, unknown) holds everything, a throttled one is
// claimable up to its budget (none while paused).
func statsPending(ctx context.Context, tx queryer, st *store.Stats, now int64) error {
	rows, err := tx.QueryContext(ctx, `SELECT tier, subscription_id, COUNT(*), COALESCE(SUM(next_attempt_at <= ?), 0),
		MIN(CASE WHEN next_attempt_at <= ? THEN next_attempt_at END)
		FROM deliveries WHERE state = 'pending' GROUP BY tier, subscription_id`, now, now)
	if err != nil {
		return err
	}
	defer rows.Close()
	var due []subTierDue
	subs := map[string]bool{}
	for rows.Next() {
		var (
			d       subTierDue
			pending int64
			oldest  sql.NullInt64
		)
		if err := rows.Scan(&d.tier, &d.sub, &pending, &d.due, &oldest); err != nil {
			return err
		}
		if d.tier < 0 {
			continue
		}
		st.Tier(d.tier).Pending += pending
		if d.due > 0 {
			d.oldest = oldest.Int64
			due = append(due, d)
			subs[d.sub] = true
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(due) == 0 {
		return nil
	}
	live, err := liveEnabled(ctx, tx, subs)
	if err != nil {
		return err
	}
	throttled, err := throttledSubs(ctx, tx)
	if err != nil {
		return err
	}
	budgets := map[string]int{}
	oldest := map[int]int64{}
	for _, d := range due {
		budget := math.MaxInt
		if t := throttled[d.sub]; t != nil && live[d.sub] {
			b, ok := budgets[d.sub]
			if !ok {
				if b, _, _, err = throttleBudget(ctx, tx, t, now); err != nil {
					return err
				}
				budgets[d.sub] = b
			}
			budget = b
		}
		claimable, held := store.Claimable(d.due, live[d.sub], budget)
		ts := st.Tier(d.tier)
		ts.Due += claimable
		ts.Held += held
		if claimable > 0 {
			if o, ok := oldest[d.tier]; !ok || d.oldest < o {
				oldest[d.tier] = d.oldest
			}
		}
	}
	for tier, o := range oldest {
		if o < now {
			st.Tier(tier).OldestPendingAge = time.Duration(now-o) * time.Millisecond
		}
	}
	return nil
}

// liveEnabled returns which of ids are enabled subscriptions that are not
// deleted.
func liveEnabled(ctx context.Context, tx queryer, ids map[string]bool) (map[string]bool, error) {
	list := make([]any, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	return subscriptionsWhere(ctx, tx, "state = 'enabled' AND deleted_at IS NULL", list)
}
