package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/store"
)

// statsTiersSQL counts the queue per tier: pending, in flight, and the due
// pending deliveries split into claimable (Due) and held (see
// store.TierStats). It reads only pending and in-flight rows, grouped by
// subscription first so each subscription is judged once per tier: not
// live (disabled, deleted, unknown) holds everything; a throttled one
// (throttle.go) is claimable up to its budget, 0 while paused.
// statsTiersUnthrottledSQL, used while no throttled subscription exists
// (subscriptionKinds), leaves the budget out: planning it was two thirds
// of the statement's cost, paid by every node's rebalancer each second
// (issue 26).
var (
	statsTiersSQL            = statsTiersStatement(true)
	statsTiersUnthrottledSQL = statsTiersStatement(false)
)

func statsTiersStatement(throttled bool) string {
	claimable := `WHEN q.due = 0 OR s.id IS NULL OR s.state <> 'enabled' OR s.deleted_at IS NOT NULL THEN 0`
	if throttled {
		claimable += `
		WHEN NOT ` + throttledPredicate + ` THEN q.due
		ELSE least(q.due, (` + throttleBudgetSQL + `)) END`
	} else {
		claimable += ` ELSE q.due END`
	}
	return `
WITH q AS (
	SELECT tier, subscription_id,
		count(*) FILTER (WHERE state = 'pending') AS pending,
		count(*) FILTER (WHERE state = 'in_flight') AS in_flight,
		count(*) FILTER (WHERE state = 'pending' AND next_attempt_at <= @now::timestamptz) AS due,
		min(next_attempt_at) FILTER (WHERE state = 'pending' AND next_attempt_at <= @now::timestamptz) AS oldest
	FROM deliveries WHERE state IN ('pending', 'in_flight')
	GROUP BY tier, subscription_id
), c AS (
	SELECT q.tier, q.pending, q.in_flight, q.due, q.oldest, CASE
		` + claimable + ` AS claimable
	FROM q LEFT JOIN subscriptions s ON s.id = q.subscription_id
)
SELECT tier, sum(pending)::bigint, sum(in_flight)::bigint, sum(claimable)::bigint,
	sum(due - claimable)::bigint, min(oldest) FILTER (WHERE claimable > 0)
FROM c GROUP BY tier ORDER BY tier`
}

// statsCountsSQL reads the counters: dead, skipped and superseded kept by
// triggers (migration 007), delivered by completions (delivered_counter).
const statsCountsSQL = `SELECT coalesce(sum(dead), 0)::bigint, coalesce(sum(skipped), 0)::bigint,
	coalesce(sum(superseded), 0)::bigint,
	(SELECT coalesce(sum(n), 0)::bigint FROM delivered_counter)
	FROM delivery_counts`

// StatsGet counts the queue per tier and reads the finished-state counters:
// nothing here grows with the history retention keeps.
func (s *Store) StatsGet(ctx context.Context, params *store.StatsGetParams) (*store.Stats, error) {
	const op = "error reading stats"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	tiersSQL, throttled, err := s.throttledChoice(ctx, db, statsTiersUnthrottledSQL, statsTiersSQL) // ordering.go
	if err != nil {
		return nil, mapErr(op, err)
	}
	now := ms(params.Now)
	batch := &pgx.Batch{}
	batch.Queue(tiersSQL, pgx.NamedArgs{"now": now, "throttle_margin_ms": store.ThrottleMargin.Milliseconds()})
	batch.Queue(statsCountsSQL)
	br := db.SendBatch(ctx, batch)
	defer br.Close()
	st := store.NewStats(params.Tiers)
	rows, err := br.Query()
	if err != nil {
		return nil, mapErr(op, err)
	}
	var (
		tier                         int
		pending, inFlight, due, held int64
		oldest                       *time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&tier, &pending, &inFlight, &due, &held, &oldest}, func() error {
		ts := st.Tier(tier)
		ts.Pending, ts.InFlight, ts.Due, ts.Held = pending, inFlight, due, held
		if oldest != nil {
			ts.OldestPendingAge = max(now.Sub(*oldest), 0)
		}
		return nil
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	if err := br.QueryRow().Scan(&st.Dead, &st.Skipped, &st.Superseded, &st.DeliveredTotal); err != nil {
		return nil, mapErr(op, err)
	}
	if err := br.Close(); err != nil {
		return nil, mapErr(op, err)
	}
	if !throttled {
		return st, nil // nothing is throttled: no round trip for throttledCount
	}
	if st.Throttled, err = throttledCount(ctx, db, params.Tiers, params.Now); err != nil {
		return nil, mapErr(op, err)
	}
	return st, nil
}
