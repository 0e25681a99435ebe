package postgres

import (
	"context"

	"github.com/heraldhq/herald/store"
)

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
	SELECT e.id, e.tenant FROM events e
	WHERE e.created_at < $1
	  -- A probe of deliveries_event_idx per old event (a scalar subquery
	  -- with LIMIT, never an anti-join hashing every delivery).
	  AND (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.event_tenant = e.tenant LIMIT 1) IS NULL
	ORDER BY e.created_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), gone AS (
	DELETE FROM events e USING victims v WHERE e.id = v.id AND e.tenant = v.tenant RETURNING 1
)
SELECT count(*) FROM gone`

// sweepKeysSQL is one store.SweepScanStep over delivery_keys: it reads up
// to $3 rows after the primary key ($1, $2) and deletes those of them that
// go (store/retention.go): every key row of a deleted (or removed)
// subscription, and when $4 the rows of idle keys — not held, last sent
// before $5 with the key interval run out at $6, and no pending or in-flight
// delivery (a probe of deliveries_key_order_idx, whose predicate the
// subquery repeats). FOR UPDATE SKIP LOCKED leaves a key a claim is
// deciding to that claim; a claim that then finds its key row gone skips
// the key, and the next claim creates the row again, empty. It returns the
// rows examined, the last primary key examined and the rows deleted.
const sweepKeysSQL = `
WITH scan AS (
	SELECT subscription_id, event_key FROM delivery_keys
	WHERE (subscription_id, event_key) > ($1, $2)
	ORDER BY subscription_id, event_key LIMIT $3
), victims AS (
	SELECT k.subscription_id, k.event_key FROM scan x
	JOIN delivery_keys k ON k.subscription_id = x.subscription_id AND k.event_key = x.event_key
	LEFT JOIN subscriptions s ON s.id = k.subscription_id
	WHERE s.id IS NULL OR s.deleted_at IS NOT NULL
	   OR ($4::boolean AND k.holder IS NULL
		AND (k.last_sent_at IS NULL OR (k.last_sent_at < $5
			AND k.last_sent_at + s.key_interval_ms * interval '1 millisecond' <= $6))
		AND (SELECT 1 FROM deliveries d
			WHERE d.subscription_id = k.subscription_id AND d.event_key = k.event_key
			  AND d.event_key <> '' AND d.state IN ('pending', 'in_flight') LIMIT 1) IS NULL)
	FOR UPDATE OF k SKIP LOCKED
), gone AS (
	DELETE FROM delivery_keys k USING victims v
	WHERE k.subscription_id = v.subscription_id AND k.event_key = v.event_key
	RETURNING 1
), tail AS (
	SELECT subscription_id, event_key FROM scan ORDER BY subscription_id DESC, event_key DESC LIMIT 1
)
SELECT (SELECT count(*) FROM scan), coalesce((SELECT subscription_id FROM tail), ''),
	coalesce((SELECT event_key FROM tail), ''), (SELECT count(*) FROM gone)`

// sweepSecretsSQL deletes one batch of secrets that expired before $1,
// never a subscription's last: another secret of the subscription must
// outlive the cutoff.
const sweepSecretsSQL = `
WITH victims AS (
	SELECT x.id FROM subscription_secrets x
	WHERE x.expires_at < $1
	  AND EXISTS (SELECT 1 FROM subscription_secrets n WHERE n.subscription_id = x.subscription_id
		AND (n.expires_at IS NULL OR n.expires_at >= $1))
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), gone AS (
	DELETE FROM subscription_secrets x WHERE x.id = ANY (ARRAY(SELECT id FROM victims)) RETURNING 1
)
SELECT count(*) FROM gone`

// sweepSubscriptionsSQL removes one batch of subscriptions deleted before
// $1 that have no delivery left (a probe of deliveries_subscription_idx
// each), with every row that names them. The foreign key of the secrets is
// checked at the end of the statement, when they are gone too.
const sweepSubscriptionsSQL = `
WITH victims AS (
	SELECT s.id FROM subscriptions s
	WHERE s.deleted_at < $1
	  AND (SELECT 1 FROM deliveries d WHERE d.subscription_id = s.id LIMIT 1) IS NULL
	ORDER BY s.deleted_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), secrets AS (
	DELETE FROM subscription_secrets x WHERE x.subscription_id = ANY (ARRAY(SELECT id FROM victims))
), keys AS (
	DELETE FROM delivery_keys k WHERE k.subscription_id = ANY (ARRAY(SELECT id FROM victims))
), throttle AS (
	DELETE FROM subscription_throttle t WHERE t.subscription_id = ANY (ARRAY(SELECT id FROM victims))
), starts AS (
	DELETE FROM throttle_starts t WHERE t.subscription_id = ANY (ARRAY(SELECT id FROM victims))
), gone AS (
	DELETE FROM subscriptions s WHERE s.id = ANY (ARRAY(SELECT id FROM victims)) RETURNING 1
)
SELECT count(*) FROM gone`

// orphanAttemptsSQL is one store.SweepScanStep: it reads up to $2 attempt
// rows after delivery id $1 in the order of the attempts' primary key, and
// deletes every attempt of those delivery ids that have no delivery (a
// primary-key probe each). It returns the rows examined, the last delivery
// id examined and the attempts deleted.
const orphanAttemptsSQL = `
WITH scan AS (
	SELECT delivery_id FROM attempts WHERE delivery_id > $1 ORDER BY delivery_id LIMIT $2
), orphans AS (
	SELECT DISTINCT s.delivery_id FROM scan s
	WHERE (SELECT 1 FROM deliveries d WHERE d.id = s.delivery_id LIMIT 1) IS NULL
), gone AS (
	DELETE FROM attempts a WHERE a.delivery_id = ANY (ARRAY(SELECT delivery_id FROM orphans)) RETURNING 1
)
SELECT (SELECT count(*) FROM scan), coalesce((SELECT max(delivery_id) FROM scan), ''), (SELECT count(*) FROM gone)`

// RetentionSweep deletes what retention no longer keeps (store.RetentionRun
// runs the steps below), one short transaction (one statement) per batch.
func (s *Store) RetentionSweep(ctx context.Context, params *store.RetentionSweepParams) (*store.RetentionSweepResult, error) {
	return store.RetentionRun(ctx, sweeper{s}, params)
}

// sweepOp names the sweep in its errors.
const sweepOp = "error sweeping retention"

// sweeper is the store as a store.RetentionBackend: one statement per step
// (the rules: store/retention.go), run again on a serialization failure
// (retryMoved).
type sweeper struct{ s *Store }

func (w sweeper) RetentionCursors() *store.RetentionCursors { return &w.s.swept }

// count runs a statement that returns one count.
func (w sweeper) count(ctx context.Context, sql string, args ...any) (int, error) {
	db, err := w.s.db(sweepOp)
	if err != nil {
		return 0, err
	}
	var n int
	err = retryMoved(ctx, func() error { return db.QueryRow(ctx, sql, args...).Scan(&n) })
	return n, mapErr(sweepOp, err)
}

// RetentionDeliveryDelete runs sweepDeliveriesSQL.
func (w sweeper) RetentionDeliveryDelete(ctx context.Context, p *store.RetentionDeliveryDeleteParams) (int, error) {
	states := make([]string, len(p.States))
	for i, st := range p.States {
		states[i] = string(st)
	}
	return w.count(ctx, sweepDeliveriesSQL, states, ms(p.Before), p.Limit)
}

// RetentionEventDelete runs sweepEventsSQL.
func (w sweeper) RetentionEventDelete(ctx context.Context, p *store.RetentionEventDeleteParams) (int, error) {
	return w.count(ctx, sweepEventsSQL, ms(p.Before), p.Limit)
}

// RetentionSecretDelete runs sweepSecretsSQL.
func (w sweeper) RetentionSecretDelete(ctx context.Context, p *store.RetentionSecretDeleteParams) (int, error) {
	return w.count(ctx, sweepSecretsSQL, ms(p.Before), p.Limit)
}

// RetentionSubscriptionDelete runs sweepSubscriptionsSQL.
func (w sweeper) RetentionSubscriptionDelete(ctx context.Context, p *store.RetentionSubscriptionDeleteParams) (int, error) {
	return w.count(ctx, sweepSubscriptionsSQL, ms(p.Before), p.Limit)
}

// RetentionKeyScan runs sweepKeysSQL; idle keys go only under Events
// retention (IdleBefore set).
func (w sweeper) RetentionKeyScan(ctx context.Context, p *store.RetentionKeyScanParams) (*store.RetentionScanResult, error) {
	db, err := w.s.db(sweepOp)
	if err != nil {
		return nil, err
	}
	after := p.After
	if after == nil {
		after = []string{"", ""}
	}
	var sub, key string
	res := &store.RetentionScanResult{}
	err = retryMoved(ctx, func() error {
		return db.QueryRow(ctx, sweepKeysSQL, after[0], after[1], p.Limit, !p.IdleBefore.IsZero(), ms(p.IdleBefore), ms(p.Now)).
			Scan(&res.Examined, &sub, &key, &res.Deleted)
	})
	res.Last = []string{sub, key}
	return res, mapErr(sweepOp, err)
}

// RetentionAttemptScan runs orphanAttemptsSQL.
func (w sweeper) RetentionAttemptScan(ctx context.Context, p *store.RetentionAttemptScanParams) (*store.RetentionScanResult, error) {
	db, err := w.s.db(sweepOp)
	if err != nil {
		return nil, err
	}
	from, id := "", ""
	if p.After != nil {
		from = p.After[0]
	}
	res := &store.RetentionScanResult{}
	err = retryMoved(ctx, func() error {
		return db.QueryRow(ctx, orphanAttemptsSQL, from, p.Limit).Scan(&res.Examined, &id, &res.Deleted)
	})
	res.Last = []string{id}
	return res, mapErr(sweepOp, err)
}
