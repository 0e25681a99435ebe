package sqlite

import (
	"context"
	"errors"
	"strings"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// EventList pages through events newest first by (created_at, id), walking
// events_created_at backwards; type (a pattern) and key filters are checked on the way.
func (s *Store) EventList(ctx context.Context, params *store.EventListParams) (*store.EventListResult, error) {
	limit := store.PageLimit(params.Limit)
	var (
		where []string
		args  []any
	)
	if params.Type != "" {
		// GLOB, not LIKE: SQLite's LIKE ignores case; see herald.EventTypeLike.
		if _, literal := herald.EventTypeLike(params.Type); literal {
			where, args = append(where, "type = ?"), append(args, params.Type)
		} else {
			where, args = append(where, "type GLOB ?"), append(args, params.Type)
		}
	}
	if params.ExcludeSystem {
		// GLOB: case-sensitive like herald.IsSystemEventType.
		where = append(where, "type NOT GLOB 'herald.?*'")
	}
	if params.Key != "" {
		where, args = append(where, "key = ?"), append(args, params.Key)
	}
	if params.Tenant != "" {
		// "tenant <> ''" lets the planner use the partial index events_tenant.
		where, args = append(where, "tenant = ? AND tenant <> ''"), append(args, params.Tenant)
	}
	if !params.Since.IsZero() {
		where, args = append(where, "created_at >= ?"), append(args, ms(params.Since))
	}
	if !params.Until.IsZero() {
		where, args = append(where, "created_at < ?"), append(args, ms(params.Until))
	}
	after, dir := "<", "DESC"
	if params.Oldest {
		after, dir = ">", "ASC"
	}
	if c := params.After; c != nil {
		at := ms(c.CreatedAt)
		where = append(where, "(created_at "+after+" ? OR (created_at = ? AND id "+after+" ?))")
		args = append(args, at, at, c.ID)
	}
	query := `SELECT ` + eventColumns + ` FROM events`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY created_at ` + dir + `, id ` + dir + ` LIMIT ?`
	args = append(args, limit+1)

	res := &store.EventListResult{}
	err := s.readTx(ctx, "event list", func(tx queryer) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			ev, err := scanEvent(rows)
			if err != nil {
				return err
			}
			res.Events = append(res.Events, ev)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	if len(res.Events) > limit {
		res.Events, res.More = res.Events[:limit], true
	}
	return res, nil
}

// DeadLetterCount counts what DeadLetterRedrive would take without a limit.
func (s *Store) DeadLetterCount(ctx context.Context, params *store.DeadLetterRedriveParams) (int, error) {
	if params.SubscriptionID == "" {
		return 0, errors.New("sqlite: dead letter count: SubscriptionID is required")
	}
	where, args := deadLetterWhere(params)
	var n int
	err := s.readTx(ctx, "dead letter count", func(tx queryer) error {
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM deliveries WHERE `+where, args...).Scan(&n)
	})
	return n, err
}

// DeadLetterGroupList groups the dead letters (deliveries_dead index) by
// subscription and error class.
func (s *Store) DeadLetterGroupList(ctx context.Context, params *store.DeadLetterGroupListParams) ([]*store.DeadLetterGroup, error) {
	query := `SELECT subscription_id, last_error, count(*), min(updated_at), max(updated_at)
		FROM deliveries WHERE state = 'dead'`
	var args []any
	if params.SubscriptionID != "" {
		query += ` AND subscription_id = ?`
		args = append(args, params.SubscriptionID)
	}
	if params.Tenant != "" {
		query += ` AND subscription_id IN (SELECT id FROM subscriptions WHERE tenant = ? AND tenant <> '')`
		args = append(args, params.Tenant)
	}
	query += ` GROUP BY subscription_id, last_error ORDER BY count(*) DESC, subscription_id, last_error`
	var out []*store.DeadLetterGroup
	err := s.readTx(ctx, "dead letter groups", func(tx queryer) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				g            store.DeadLetterGroup
				class        string
				oldest, last int64
			)
			if err := rows.Scan(&g.SubscriptionID, &class, &g.Count, &oldest, &last); err != nil {
				return err
			}
			g.Error, g.OldestAt, g.NewestAt = herald.ErrorClass(class), fromMS(oldest), fromMS(last)
			out = append(out, &g)
		}
		return rows.Err()
	})
	return out, err
}

// SubscriptionStatsList reads finished deliveries through deliveries_finished
// (state, updated_at) and dead letters through deliveries_dead, and the queue
// through the pending and in-flight partial indexes.
func (s *Store) SubscriptionStatsList(ctx context.Context, params *store.SubscriptionStatsListParams) ([]*store.SubscriptionStats, error) {
	since := ms(params.Since)
	byID := map[string]*store.SubscriptionStats{}
	err := s.readTx(ctx, "subscription stats", func(tx queryer) error {
		rows, err := tx.QueryContext(ctx, `
			SELECT subscription_id, state, count(*) FROM deliveries
			WHERE state IN ('delivered', 'dead') AND updated_at >= ?1
				AND (?2 = '' OR subscription_id IN (SELECT id FROM subscriptions WHERE tenant = ?2 AND tenant <> ''))
			GROUP BY subscription_id, state
			UNION ALL
			SELECT subscription_id, state, count(*) FROM deliveries
			WHERE state IN ('pending', 'in_flight')
				AND (?2 = '' OR subscription_id IN (SELECT id FROM subscriptions WHERE tenant = ?2 AND tenant <> ''))
			GROUP BY subscription_id, state`, since, params.Tenant)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				id, state string
				n         int
			)
			if err := rows.Scan(&id, &state, &n); err != nil {
				return err
			}
			st := byID[id]
			if st == nil {
				st = &store.SubscriptionStats{SubscriptionID: id}
				byID[id] = st
			}
			store.SubscriptionStatsAdd(st, herald.DeliveryState(state), n)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return store.SubscriptionStatsSorted(byID), nil
}
