package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// EventList pages through events newest first by (created_at, id), walking
// events_created_at_idx backwards; type and key filters are checked on the
// way.
func (s *Store) EventList(ctx context.Context, params *store.EventListParams) (*store.EventListResult, error) {
	const op = "error listing events"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	limit := store.PageLimit(params.Limit)
	q := conds{where: "TRUE"}
	add := q.add
	if params.Type != "" {
		if like, literal := herald.EventTypeLike(params.Type); literal {
			add("type =", params.Type)
		} else {
			add("type LIKE", like) // '\\' is PostgreSQL's default LIKE escape
		}
	}
	if params.ExcludeSystem {
		q.where += " AND type NOT LIKE 'herald._%'" // as herald.IsSystemEventType
	}
	if params.Key != "" {
		add("key =", params.Key)
	}
	if params.Tenant != "" {
		add("tenant =", params.Tenant)
		// Lets the planner use the partial index events_tenant.
		q.where += " AND tenant <> ''"
	}
	if !params.Since.IsZero() {
		add("created_at >=", ms(params.Since))
	}
	if !params.Until.IsZero() {
		add("created_at <", ms(params.Until))
	}
	after, dir := "<", "DESC"
	if params.Oldest {
		after, dir = ">", "ASC"
	}
	if c := params.After; c != nil {
		q.where += " AND (created_at, id) " + after + " (" + q.arg(ms(c.CreatedAt)) + ", " + q.arg(c.ID) + ")"
	}
	lim := q.arg(limit + 1)
	rows, err := db.Query(ctx, "SELECT "+eventColumns+" FROM events WHERE "+q.where+
		" ORDER BY created_at "+dir+", id "+dir+" LIMIT "+lim, q.args...)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	res := &store.EventListResult{}
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil, mapErr(op, err)
		}
		res.Events = append(res.Events, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(op, err)
	}
	if len(res.Events) > limit {
		res.Events, res.More = res.Events[:limit], true
	}
	return res, nil
}

// DeadLetterCount counts what DeadLetterRedrive would take without a limit.
func (s *Store) DeadLetterCount(ctx context.Context, params *store.DeadLetterRedriveParams) (int, error) {
	const op = "error counting dead letters"
	if params.SubscriptionID == "" {
		return 0, errors.New("postgres: dead letter count: SubscriptionID is required")
	}
	db, err := s.db(op)
	if err != nil {
		return 0, err
	}
	where, args := deadLetterWhere(params)
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*)::int FROM deliveries d WHERE "+where, args...).Scan(&n); err != nil {
		return 0, mapErr(op, err)
	}
	return n, nil
}

// DeadLetterGroupList groups the dead letters (deliveries_dead_idx) by
// subscription and error class.
func (s *Store) DeadLetterGroupList(ctx context.Context, params *store.DeadLetterGroupListParams) ([]*store.DeadLetterGroup, error) {
	const op = "error grouping dead letters"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT subscription_id, last_error, count(*)::int, min(updated_at), max(updated_at)
		FROM deliveries WHERE state = 'dead' AND ($1 = '' OR subscription_id = $1)
			AND ($2 = '' OR subscription_id IN (SELECT id FROM subscriptions WHERE tenant = $2 AND tenant <> ''))
		GROUP BY subscription_id, last_error ORDER BY count(*) DESC, subscription_id, last_error`,
		params.SubscriptionID, params.Tenant)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.DeadLetterGroup, error) {
		var (
			g     store.DeadLetterGroup
			class string
		)
		if err := row.Scan(&g.SubscriptionID, &class, &g.Count, &g.OldestAt, &g.NewestAt); err != nil {
			return nil, err
		}
		g.Error, g.OldestAt, g.NewestAt = herald.ErrorClass(class), g.OldestAt.UTC(), g.NewestAt.UTC()
		return &g, nil
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// SubscriptionStatsList counts finished deliveries through
// deliveries_finished_idx and the queue through the active partition.
func (s *Store) SubscriptionStatsList(ctx context.Context, params *store.SubscriptionStatsListParams) ([]*store.SubscriptionStats, error) {
	const op = "error counting subscription stats"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `
		SELECT subscription_id, state, count(*)::int FROM deliveries
		WHERE state IN ('delivered', 'dead') AND updated_at >= $1
			AND ($2 = '' OR subscription_id IN (SELECT id FROM subscriptions WHERE tenant = $2 AND tenant <> ''))
		GROUP BY subscription_id, state
		UNION ALL
		SELECT subscription_id, state, count(*)::int FROM deliveries
		WHERE state IN ('pending', 'in_flight')
			AND ($2 = '' OR subscription_id IN (SELECT id FROM subscriptions WHERE tenant = $2 AND tenant <> ''))
		GROUP BY subscription_id, state`, ms(params.Since), params.Tenant)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	byID := map[string]*store.SubscriptionStats{}
	for rows.Next() {
		var (
			id, state string
			n         int
		)
		if err := rows.Scan(&id, &state, &n); err != nil {
			return nil, mapErr(op, err)
		}
		st := byID[id]
		if st == nil {
			st = &store.SubscriptionStats{SubscriptionID: id}
			byID[id] = st
		}
		store.SubscriptionStatsAdd(st, herald.DeliveryState(state), n)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(op, err)
	}
	return store.SubscriptionStatsSorted(byID), nil
}
