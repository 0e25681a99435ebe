package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Throttling (rate_limit, max_in_flight, Retry-After pauses). The rule is
// store/throttle.go's (store.ThrottleState.Budget). Where one row at a time
// is enough (throttleWaitingFor) this file counts and the Go function
// decides; the statements that decide for every subscription at once
// (claimSQL's cap, the ordered discovery, NextDue, the stats) use
// throttleBudgetSQL and throttleReturnsSQL, the rule's one SQL form, whose
// window comes from Go (@throttle_margin_ms). TestThrottleBudgetSQL holds
// the two forms to the same answers.
//
// Only subscriptions matching throttledPredicate pay for any of it: the
// statements below find them through the partial index
// subscriptions_throttled (empty when nothing is throttled), and claimSQL
// evaluates the budget expression only for them (CASE), so an unthrottled
// subscription is claimed exactly as before.
//
// Request starts are rows of throttle_starts, inserted by claimSQL itself
// (the claim is the start), at max(@now, the newest start of the
// subscription). The in-flight count is the number of distinct deliveries
// named by those rows that are still in_flight, so it needs no new index
// on deliveries.
//
// Serialization across nodes: before claimSQL, the claim transaction locks
// (FOR UPDATE, in id order) the subscription_throttle row of every rate- or
// in-flight-limited subscription with due work in the tier. claimSQL then
// runs with a snapshot taken after those locks were granted (READ
// COMMITTED), so it sees every start committed by the previous holder: two
// nodes cannot both spend the last budget. The lock statements are sent in
// the same round trip as the claim (a pipeline), so they cost no extra
// round trip, and the budget is counted inside the claim statement for the
// same reason: computing it in Go would need the counts back first, one
// more round trip per claim. Because of that the claim reads its clock
// (DeliveryClaimParams.ClaimStart) only after its claim statements and
// reads, and moves the starts it recorded at Now to that time
// (throttleRestartSQL) just before it commits: a claim that waited for the
// locks records when its requests really start. Only claims that took
// rate-limited deliveries do it (one more round trip). While no
// subscription has a rate limit or an in-flight cap (cached, orderedCache),
// the locks are not taken and claimPlainSQL leaves limited subscriptions
// out instead.

// throttledPredicate selects the subscriptions the throttle looks at.
const throttledPredicate = `(s.rate_limit_max IS NOT NULL OR s.max_in_flight > 0 OR s.paused_until IS NOT NULL)`

// limitedPredicate selects those whose budget has to be counted and locked.
const limitedPredicate = `(s.rate_limit_max IS NOT NULL OR s.max_in_flight > 0)`

// rateWindowSQL is a subscription's rate window (store.RateWindow) as an
// interval.
const rateWindowSQL = `((coalesce(s.rate_limit_per_seconds, 0) * 1000 + @throttle_margin_ms) * interval '1 millisecond')`

// throttleBudgetSQL is store.ThrottleState.Budget's budget for
// subscription s at @now (2147483647 when unlimited).
const throttleBudgetSQL = `CASE WHEN s.paused_until > @now::timestamptz THEN 0 ELSE greatest(0, least(
	CASE WHEN s.rate_limit_max IS NULL THEN 2147483647 ELSE s.rate_limit_max - (SELECT count(*) FROM throttle_starts t
		WHERE t.subscription_id = s.id AND t.at > @now::timestamptz - ` + rateWindowSQL + `)::int END,
	CASE WHEN s.max_in_flight <= 0 THEN 2147483647 ELSE s.max_in_flight - (SELECT count(DISTINCT t.delivery_id)
		FROM throttle_starts t JOIN deliveries d ON d.id = t.delivery_id
		WHERE t.subscription_id = s.id AND d.state = 'in_flight')::int END)) END`

// throttleReturnsSQL is store.ThrottleState.Budget's returns for
// subscription s out of budget at @now; NULL for its zero time.
const throttleReturnsSQL = `CASE WHEN s.paused_until > @now::timestamptz THEN s.paused_until ELSE
	(SELECT t.at FROM throttle_starts t WHERE s.rate_limit_max IS NOT NULL AND t.subscription_id = s.id
		AND t.at > @now::timestamptz - ` + rateWindowSQL + `
		ORDER BY t.at DESC OFFSET greatest(s.rate_limit_max - 1, 0) LIMIT 1) + ` + rateWindowSQL + ` END`

// claimCapSQL is how many deliveries claimSQL may take from subscription s:
// @share, or less when it is throttled. (A filter on the rows' rank, not
// the LIMIT of the index scan: a LIMIT the planner cannot read made it
// give up the ordered index scan, 20x slower.)
const claimCapSQL = `CASE WHEN NOT ` + throttledPredicate + ` THEN @share ELSE least(@share, ` + throttleBudgetSQL + `) END`

// throttleStartedSQL is a CTE of claimSQL recording the starts of the
// rate- or in-flight-limited subscriptions' claimed deliveries.
const throttleStartedSQL = `started AS (
	INSERT INTO throttle_starts (subscription_id, at, delivery_id)
	SELECT c.subscription_id, greatest(@now::timestamptz,
		(SELECT max(t.at) FROM throttle_starts t WHERE t.subscription_id = c.subscription_id)), c.id
	FROM claimed c
	WHERE c.subscription_id = ANY (ARRAY(SELECT s.id FROM subscriptions s WHERE ` + limitedPredicate + `))
)`

// limitedDueSQL selects the limited subscriptions with due work in @tier.
// The due check is a scalar subquery, not EXISTS: the planner turns EXISTS
// into a semi-join and, misjudging these small tables, may hash every
// pending delivery (measured: 5 ms claims became 240 ms).
const limitedDueSQL = `FROM subscription_throttle x JOIN subscriptions s ON s.id = x.subscription_id
	WHERE ` + limitedPredicate + ` AND s.state = 'enabled' AND s.deleted_at IS NULL
	  AND (s.paused_until IS NULL OR s.paused_until <= @now::timestamptz)
	  AND (SELECT d.next_attempt_at FROM deliveries d WHERE d.tier = @tier AND d.subscription_id = s.id
		AND d.state = 'pending' AND d.next_attempt_at <= @now::timestamptz
		ORDER BY d.next_attempt_at LIMIT 1) IS NOT NULL`

// throttleLockSQLs run, in order, before the first claimSQL of a claim:
// create missing throttle rows, lock them, prune start rows no longer
// needed (outside the window and not in flight).
var throttleLockSQLs = []string{
	customPlansSQL,
	asyncCommitSQL,
	`INSERT INTO subscription_throttle (subscription_id)
	SELECT s.id FROM subscriptions s
	WHERE ` + limitedPredicate + ` AND s.state = 'enabled' AND s.deleted_at IS NULL
	  AND NOT EXISTS (SELECT 1 FROM subscription_throttle x WHERE x.subscription_id = s.id)
	ON CONFLICT DO NOTHING`,
	`SELECT x.subscription_id ` + limitedDueSQL + ` ORDER BY x.subscription_id FOR UPDATE OF x`,
	`DELETE FROM throttle_starts t USING (SELECT s.id, ` + rateWindowSQL + ` AS w ` + limitedDueSQL + `) l
	WHERE t.subscription_id = l.id AND t.at <= @now::timestamptz - l.w
	  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.id = t.delivery_id AND d.state = 'in_flight')`,
}

// claimLockSQLs are the statements before a claim's first: the
// transaction settings, and the throttle locks when a subscription may be
// limited (without, claimPlainSQL claims none, so no lock is needed).
func claimLockSQLs(limited bool) []string {
	if limited {
		return throttleLockSQLs
	}
	return throttleLockSQLs[:2]
}

// batchRows is the claimSQL result read from a pipeline: closing it closes
// the pipeline too, so the transaction can go on.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	return errors.Join(r.Rows.Err(), r.err)
}

// claimQuery runs claimSQL; the first time in a transaction (lock) it runs
// throttleLockSQLs before it, in the same round trip. (With ordered
// subscriptions, newOrderedClaim sends throttleLockSQLs instead, in its
// first round trip, and reads their budget there.)
func claimQuery(ctx context.Context, tx pgx.Tx, lock, limited bool, args pgx.NamedArgs) (pgx.Rows, error) {
	args["throttle_margin_ms"] = store.ThrottleMargin.Milliseconds()
	q := claimSQL
	if !limited {
		q = claimPlainSQL
	}
	if !lock {
		return tx.Query(ctx, q, args)
	}
	batch := &pgx.Batch{}
	for _, l := range claimLockSQLs(limited) {
		batch.Queue(l, args)
	}
	batch.Queue(q, args)
	br := tx.SendBatch(ctx, batch)
	for range batch.Len() - 1 {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// pauseSQL applies DeliveryCompleteManyParams.PauseSubscriptions and, when
// a paused_until moved, bumps the pauses version (not the subscriptions
// version: fan-out caches then reload the pauses alone). An id repeated
// in one call keeps its latest Until.
const pauseSQL = `
WITH x AS (
	SELECT id, max(until) AS until FROM unnest($1::text[], $2::timestamptz[]) AS x(id, until) GROUP BY id
), u AS (
	UPDATE subscriptions s SET paused_until = x.until
	FROM x
	WHERE s.id = x.id AND s.deleted_at IS NULL AND (s.paused_until IS NULL OR s.paused_until < x.until)
	RETURNING 1
)
UPDATE subscriptions_version SET pauses_version = pauses_version + 1 WHERE EXISTS (SELECT 1 FROM u)`

// queuePauses adds pauseSQL to a completion batch; it reports whether it did.
func queuePauses(batch *pgx.Batch, pauses []store.SubscriptionPause) bool {
	if len(pauses) == 0 {
		return false
	}
	ids := make([]string, len(pauses))
	until := make([]time.Time, len(pauses))
	for i, p := range pauses {
		ids[i], until[i] = p.ID, ms(p.Until)
	}
	batch.Queue(pauseSQL, ids, until)
	return true
}

// tierHeadSQL joins n.next_attempt_at: subscription s's earliest pending
// delivery in @tier, one probe of the pending index per subscription.
const tierHeadSQL = `CROSS JOIN LATERAL (
	SELECT d.next_attempt_at FROM deliveries d
	WHERE d.tier = @tier AND d.subscription_id = s.id AND d.state = 'pending'
	ORDER BY d.next_attempt_at LIMIT 1
) n`

// throttleNextDueSQL is the earliest time a throttled subscription's pending
// delivery of @tier can be claimed. For an ordered (fifo/latest) one with
// budget, a due delivery the claim left behind waits for its key, and the
// completion that frees the key wakes the engine (as in orderedNextDue): only
// its next maturity counts, or the tier loop would spin.
const throttleNextDueSQL = `SELECT min(CASE
		WHEN b.budget > 0 AND ` + orderedPredicate + ` AND n.next_attempt_at <= @now::timestamptz THEN
			(SELECT min(d.next_attempt_at) FROM deliveries d
			WHERE d.tier = @tier AND d.subscription_id = s.id AND d.state = 'pending'
			  AND d.next_attempt_at > @now::timestamptz)
		WHEN b.budget > 0 THEN n.next_attempt_at
		WHEN b.returns IS NOT NULL THEN greatest(n.next_attempt_at, b.returns) END)
	FROM subscriptions s
	` + tierHeadSQL + `
	CROSS JOIN LATERAL (SELECT ` + throttleBudgetSQL + ` AS budget, ` + throttleReturnsSQL + ` AS returns) b
	WHERE ` + throttledPredicate + ` AND s.state = 'enabled' AND s.deleted_at IS NULL`

// throttleNextDueArgs are the arguments of throttleNextDueSQL.
func throttleNextDueArgs(tier int, now time.Time) pgx.NamedArgs {
	return pgx.NamedArgs{"tier": tier, "now": ms(now), "throttle_margin_ms": store.ThrottleMargin.Milliseconds()}
}

// throttledCountSQL counts due pending deliveries of subscriptions without
// budget.
const throttledCountSQL = `SELECT coalesce(sum((SELECT count(*) FROM deliveries d
		WHERE d.tier = ANY (@tiers) AND d.subscription_id = s.id AND d.state = 'pending'
		  AND d.next_attempt_at <= @now::timestamptz)), 0)::bigint
	FROM subscriptions s
	WHERE ` + throttledPredicate + ` AND s.state = 'enabled' AND s.deleted_at IS NULL
	  AND (` + throttleBudgetSQL + `) = 0`

func throttledCount(ctx context.Context, q querier, tiers int, now time.Time) (int64, error) {
	ts := make([]int32, max(tiers, 0))
	for i := range ts {
		ts[i] = int32(i)
	}
	var n int64
	err := q.QueryRow(ctx, throttledCountSQL, pgx.NamedArgs{
		"tiers": ts, "now": ms(now), "throttle_margin_ms": store.ThrottleMargin.Milliseconds(),
	}).Scan(&n)
	return n, err
}

// throttleWaitingFor says whether a due pending delivery of subID waits for
// its subscription's throttle at now ("" when not).
func throttleWaitingFor(ctx context.Context, q querier, subID string, now time.Time) (store.WaitingFor, error) {
	st, err := throttleStateRead(ctx, q, subID, now)
	if err != nil || st == nil {
		return store.WaitingForNothing, err
	}
	_, why, _ := st.Budget(ms(now))
	return why, nil
}

// throttleStateRead counts what store.ThrottleState.Budget needs for one
// subscription at now; nil when the subscription is not throttled (or
// absent).
func throttleStateRead(ctx context.Context, q querier, subID string, now time.Time) (*store.ThrottleState, error) {
	var (
		st               store.ThrottleState
		paused, maxth    *time.Time
		rateMax, ratePer *int
	)
	err := q.QueryRow(ctx, `SELECT s.paused_until, s.rate_limit_max, s.rate_limit_per_seconds, s.max_in_flight,
		(SELECT count(*) FROM throttle_starts t
			WHERE t.subscription_id = s.id AND t.at > @now::timestamptz - `+rateWindowSQL+`)::int,
		(SELECT t.at FROM throttle_starts t WHERE s.rate_limit_max IS NOT NULL AND t.subscription_id = s.id
			AND t.at > @now::timestamptz - `+rateWindowSQL+`
			ORDER BY t.at DESC OFFSET greatest(s.rate_limit_max - 1, 0) LIMIT 1),
		(SELECT count(DISTINCT t.delivery_id) FROM throttle_starts t JOIN deliveries d ON d.id = t.delivery_id
			WHERE t.subscription_id = s.id AND d.state = 'in_flight')::int
		FROM subscriptions s WHERE s.id = @id AND `+throttledPredicate, pgx.NamedArgs{
		"id": subID, "now": ms(now), "throttle_margin_ms": store.ThrottleMargin.Milliseconds(),
	}).Scan(&paused, &rateMax, &ratePer, &st.MaxInFlight, &st.Started, &maxth, &st.InFlight)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if paused != nil {
		st.PausedUntil = *paused
	}
	if rateMax != nil {
		st.RateLimit = &herald.RateLimit{Max: *rateMax}
		if ratePer != nil {
			st.RateLimit.PerSeconds = *ratePer
		}
	}
	if maxth != nil {
		st.MaxthStart = *maxth
	}
	return &st, nil
}

// throttleRestartSQL moves the starts a claim recorded (subscriptions $1,
// deliveries $2) from its Now ($3) to its real start ($4,
// DeliveryClaimParams.ClaimStart), read once the claim held its throttle
// locks: the budget was counted at Now, over a window reaching further
// back, so it only errs on the safe side, and no later start exists yet
// (the locks are held), so the starts stay in non-decreasing order. A
// start already recorded later (another node's newer start) stays.
const throttleRestartSQL = `UPDATE throttle_starts SET at = $4
	WHERE subscription_id = ANY($1) AND at >= $3 AND at < $4 AND delivery_id = ANY($2)`

// throttleOrderedClaimed records the starts of an ordered subscription's
// claimed deliveries and spends its budget.
func throttleOrderedClaimed(ctx context.Context, tx pgx.Tx, sub *orderedSub, ids []string, now time.Time) error {
	if sub.cap < 0 || len(ids) == 0 {
		return nil
	}
	sub.cap = max(sub.cap-len(ids), 0)
	_, err := tx.Exec(ctx, `INSERT INTO throttle_starts (subscription_id, at, delivery_id)
		SELECT $1, greatest($2::timestamptz, (SELECT max(t.at) FROM throttle_starts t WHERE t.subscription_id = $1)), id
		FROM unnest($3::text[]) AS id`, sub.id, ms(now), ids)
	return err
}
