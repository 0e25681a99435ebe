package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

const deliveryColumns = `id, event_id, subscription_id, state, tier, attempt_count,
	next_attempt_at, event_key, event_version, last_status, last_error, last_message,
	created_at, updated_at, event_tenant`

func scanDelivery(row pgx.Row, extra ...any) (*herald.Delivery, error) {
	var d herald.Delivery
	var state, lastErr string
	dest := append([]any{&d.ID, &d.EventID, &d.SubscriptionID, &state, &d.Tier, &d.AttemptCount,
		&d.NextAttemptAt, &d.EventKey, &d.EventVersion, &d.LastStatus, &lastErr, &d.LastMessage,
		&d.CreatedAt, &d.UpdatedAt, &d.EventTenant}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	d.State = herald.DeliveryState(state)
	d.LastError = herald.ErrorClass(lastErr)
	d.NextAttemptAt = utcPtr(d.NextAttemptAt)
	d.CreatedAt = d.CreatedAt.UTC()
	d.UpdatedAt = d.UpdatedAt.UTC()
	return &d, nil
}

func collectDeliveries(rows pgx.Rows) ([]*herald.Delivery, error) {
	defer rows.Close()
	var out []*herald.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// DeliveryGet returns a delivery with its attempts, oldest first.
func (s *Store) DeliveryGet(ctx context.Context, id string) (*store.DeliveryGetResult, error) {
	const op = "error reading delivery"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	batch := &pgx.Batch{}
	batch.Queue("SELECT "+deliveryColumns+" FROM deliveries WHERE id = $1", id)
	batch.Queue(`SELECT n, at, duration_ms, status, error, error_message, response_excerpt, tier,
		request_headers, response_headers FROM attempts WHERE delivery_id = $1 ORDER BY n, id`, id)
	br := db.SendBatch(ctx, batch)
	defer br.Close()
	d, err := scanDelivery(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, herald.NotFoundf("delivery %s not found", id)
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, mapErr(op, err)
	}
	var (
		a             herald.Attempt
		errCode       string
		sent, replied *string
	)
	attempts := []herald.Attempt{}
	_, err = pgx.ForEachRow(rows, []any{&a.N, &a.At, &a.DurationMS, &a.Status, &errCode, &a.ErrorMessage,
		&a.ResponseExcerpt, &a.Tier, &sent, &replied}, func() error {
		a.At = a.At.UTC()
		a.Error = herald.ErrorClass(errCode)
		var err error
		if a.RequestHeaders, err = store.DecodeAttemptHeaders(sent); err != nil {
			return err
		}
		if a.ResponseHeaders, err = store.DecodeAttemptHeaders(replied); err != nil {
			return err
		}
		attempts = append(attempts, a)
		return nil
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	if err := br.Close(); err != nil {
		return nil, mapErr(op, err)
	}
	return &store.DeliveryGetResult{Delivery: d, Attempts: attempts}, nil
}

// DeliveryList pages through deliveries newest first (descending id: ids
// sort by creation time).
func (s *Store) DeliveryList(ctx context.Context, params *store.DeliveryListParams) (*store.DeliveryListResult, error) {
	const op = "error listing deliveries"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	limit := store.PageLimit(params.Limit)
	q := conds{where: "TRUE"}
	add := q.add
	if params.SubscriptionID != "" {
		add("subscription_id =", params.SubscriptionID)
	}
	if params.EventID != "" {
		add("event_id =", params.EventID)
	}
	if params.Tenant != "" {
		q.where += " AND subscription_id IN (SELECT id FROM subscriptions WHERE tenant = " + q.arg(params.Tenant) + " AND tenant <> '')"
	}
	if params.State != "" {
		add("state =", string(params.State))
	}
	if params.Before != "" {
		add("id <", params.Before)
	}
	if !params.Since.IsZero() {
		add("created_at >=", ms(params.Since))
	}
	if !params.Until.IsZero() {
		add("created_at <", ms(params.Until))
	}
	lim := q.arg(limit + 1)
	rows, err := db.Query(ctx, "SELECT "+deliveryColumns+" FROM deliveries WHERE "+q.where+
		" ORDER BY id DESC LIMIT "+lim, q.args...)
	if err != nil {
		return nil, mapErr(op, err)
	}
	dls, err := collectDeliveries(rows)
	if err != nil {
		return nil, mapErr(op, err)
	}
	res := &store.DeliveryListResult{Deliveries: dls}
	if len(dls) > limit {
		res.Deliveries, res.More = dls[:limit], true
	}
	return res, nil
}

// nextDueSQL is DeliveryNextDue's statement for unordered subscriptions
// while throttled ones exist (subscriptionKinds): those are left to
// throttleNextDueSQL (throttle.go) in the same statement.
// nextDueUnthrottledSQL, used while none exist, leaves that part out: the
// main pool plans every statement, and planning the throttle part was most
// of a poll's cost (0.5 of 0.6 ms a call, issue 26).
var (
	nextDueSQL            = nextDueStatement(true)
	nextDueUnthrottledSQL = nextDueStatement(false)
)

func nextDueStatement(throttled bool) string {
	unthrottled := `SELECT min(n.next_attempt_at)
		FROM subscriptions s
		` + tierHeadSQL + `
		WHERE s.state = 'enabled' AND s.deleted_at IS NULL AND NOT ` + throttledPredicate + `
			AND NOT ` + orderedPredicate
	if !throttled {
		return unthrottled
	}
	return `SELECT least((` + unthrottled + `), (` + throttleNextDueSQL + `))`
}

// DeliveryNextDue returns the earliest next_attempt_at of the tier's pending
// deliveries of enabled subscriptions: one index probe per enabled
// subscription, like the claim.
func (s *Store) DeliveryNextDue(ctx context.Context, params *store.DeliveryNextDueParams) (*time.Time, error) {
	const op = "error reading next due delivery"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	sql, _, err := s.throttledChoice(ctx, db, nextDueUnthrottledSQL, nextDueSQL) // ordering.go
	if err != nil {
		return nil, mapErr(op, err)
	}
	var next *time.Time
	err = db.QueryRow(ctx, sql, throttleNextDueArgs(params.Tier, params.Now)).Scan(&next)
	if err != nil {
		return nil, mapErr(op, err)
	}
	// Ordered subscriptions are left to orderedNextDue (ordering.go).
	ordered, err := s.orderedNextDue(ctx, db, params.Tier, params.Now)
	if err != nil {
		return nil, mapErr(op, err)
	}
	if ordered != nil && (next == nil || ordered.Before(*next)) {
		next = ordered
	}
	return utcPtr(next), nil
}

// deliveredShards is the number of rows of delivered_counter.
const deliveredShards = 16

// completeSQL applies outcomes whose lease is still held by their owner and
// returns the ids it changed; the others are stale.
const completeSQL = `
UPDATE deliveries d SET
	state = o.state,
	tier = o.tier,
	next_attempt_at = CASE WHEN o.state = 'pending' THEN o.next_attempt_at END,
	attempt_count = d.attempt_count + 1,
	last_status = o.status,
	last_error = o.error,
	last_message = o.message,
	lease_owner = NULL,
	lease_until = NULL,
	updated_at = $9
FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::timestamptz[], $6::int[], $7::text[], $8::text[])
	AS o(id, owner, state, tier, next_attempt_at, status, error, message)
WHERE d.id = o.id AND d.state = 'in_flight' AND d.lease_owner = o.owner
RETURNING d.id, d.state`

// completeCountSQL wraps completeSQL: it also adds the batch's delivered
// outcomes to one shard of delivered_counter (a running total that survives
// retention; sharded so completers on several nodes do not queue on one
// row) and returns the applied ids.
const completeCountSQL = `
WITH done AS (` + completeSQL + `),
bump AS (
	UPDATE delivered_counter SET n = n + (SELECT count(*) FROM done WHERE state = 'delivered')
	WHERE shard = $10 AND EXISTS (SELECT 1 FROM done WHERE state = 'delivered')
)
SELECT id FROM done`

// insertAttemptsSQL records attempts, applied or stale alike, except those
// of deliveries that do not exist (store/complete.go: no attempt, reported
// stale). The existence probe is a primary-key lookup per outcome: a
// LATERAL … LIMIT 1, because the planner turned the WHERE EXISTS this was
// into a hash semi-join over a sequential scan of every delivery (it
// cannot estimate unnest) for as long as the table was small enough for
// that to look cheaper than the probes: 8.6 ms a call at 20,000
// deliveries, the most expensive statement of a benchmark run
// (pg_stat_statements, docs/benchmarks.md), against 0.3 ms now.
const insertAttemptsSQL = `
INSERT INTO attempts (delivery_id, n, at, duration_ms, status, error, error_message, response_excerpt, tier,
	request_headers, response_headers)
SELECT a.* FROM unnest($1::text[], $2::int[], $3::timestamptz[], $4::bigint[], $5::int[], $6::text[],
	$7::text[], $8::text[], $9::int[], $10::text[], $11::text[])
	AS a(delivery_id, n, at, duration_ms, status, error, error_message, response_excerpt, tier, request_headers, response_headers)
CROSS JOIN LATERAL (SELECT 1 FROM deliveries d WHERE d.id = a.delivery_id LIMIT 1) AS present`

// disableSQL disables subscriptions and bumps the version when any changed.
// An already disabled subscription is left alone, so repeated 410s do not
// make every fan-out cache reload.
const disableSQL = `
WITH u AS (
	UPDATE subscriptions s SET state = 'disabled', disabled_reason = x.reason, updated_at = $3
	FROM unnest($1::text[], $2::text[], $4::int[]) AS x(id, reason, min_failures)
	WHERE s.id = x.id AND s.deleted_at IS NULL AND s.state <> 'disabled'
	AND (x.min_failures <= 0 OR EXISTS (SELECT 1 FROM subscription_health h
		WHERE h.subscription_id = s.id AND h.consecutive_failures >= x.min_failures))
	RETURNING s.id
), v AS (
	UPDATE subscriptions_version SET version = version + 1 WHERE EXISTS (SELECT 1 FROM u)
)
SELECT id FROM u`

// DeliveryCompleteMany applies outcomes, disables and system events as one
// batch: one round trip, one implicit transaction.
func (s *Store) DeliveryCompleteMany(ctx context.Context, params *store.DeliveryCompleteManyParams) (*store.DeliveryCompleteManyResult, error) {
	const op = "error completing deliveries"
	if err := store.OutcomesValidate(params.Outcomes); err != nil {
		return nil, err
	}
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	now := ms(params.Now)
	batch := &pgx.Batch{}
	db, generic := s.smallWrites(db, len(params.Outcomes), len(params.Events)) // claim.go
	if generic {
		batch.Queue(genericPlansSQL)
	}
	settings := batch.Len() // statements before the work
	// Rounds never repeat a delivery id (see store.OutcomeChunks); almost
	// always there is one.
	rounds := store.OutcomeChunks(params.Outcomes, 0)
	for _, round := range rounds {
		n := len(round)
		var (
			ids, owners, states, errs, msgs, excerpts = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			tiers, status, nums, attTiers             = make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
			next                                      = make([]*time.Time, n)
			reqHeaders, respHeaders                   = make([]*string, n), make([]*string, n)
			at                                        = make([]time.Time, n)
			durations                                 = make([]int64, n)
		)
		for i, o := range round {
			ids[i], owners[i], states[i] = o.DeliveryID, o.LeaseOwner, string(o.State)
			tiers[i], next[i] = int32(o.Tier), msPtr(o.NextAttemptAt)
			a := o.Attempt
			status[i], errs[i], msgs[i] = int32(a.Status), string(a.Error), a.ErrorMessage
			nums[i], at[i], durations[i], excerpts[i], attTiers[i] = int32(a.N), ms(a.At), a.DurationMS, a.ResponseExcerpt, int32(a.Tier)
			reqHeaders[i], respHeaders[i] = store.EncodeAttemptHeaders(a.RequestHeaders), store.EncodeAttemptHeaders(a.ResponseHeaders)
		}
		batch.Queue(insertAttemptsSQL, ids, nums, at, durations, status, errs, msgs, excerpts, attTiers, reqHeaders, respHeaders)
		batch.Queue(completeCountSQL, ids, owners, states, tiers, next, status, errs, msgs, now, rand.IntN(deliveredShards))
		batch.Queue(keysCompleteSQL, ids, owners, states) // free held keys (ordering.go)
	}
	health := queueHealth(batch, params.Health, params.Now) // health.go
	if len(params.DisableSubscriptions) > 0 {
		ids := make([]string, len(params.DisableSubscriptions))
		reasons := make([]string, len(params.DisableSubscriptions))
		mins := make([]int32, len(params.DisableSubscriptions))
		for i, d := range params.DisableSubscriptions {
			ids[i], reasons[i], mins[i] = d.ID, d.Reason, int32(d.MinFailures)
		}
		batch.Queue(disableSQL, ids, reasons, now, mins)
	}
	paused := queuePauses(batch, params.PauseSubscriptions) // throttle.go
	var events *eventBatch
	if len(params.Events) > 0 {
		events = newEventBatch(params.Events, params.Now)
		events.queue(batch)
	}
	res := &store.DeliveryCompleteManyResult{Stale: []string{}}
	if batch.Len() == settings { // nothing to do
		return res, nil
	}
	// The batch is one implicit transaction: when a row it waited for
	// moved partition (retryMoved) nothing was applied, and it runs again.
	tries := 0
	err = retryMoved(ctx, func() error {
		res.Applied, res.Stale, res.Health, res.Disabled = 0, res.Stale[:0], res.Health[:0], nil
		if tries++; tries > 1 {
			batch = rebatch(batch)
		}
		br := db.SendBatch(ctx, batch)
		err := completeRead(br, generic, rounds, res, health, len(params.DisableSubscriptions) > 0, paused, events, params.Events)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	if paused {
		s.orderedInvalidate() // a paused subscription is throttled (ordering.go)
	}
	s.notifyCompleted(params) // wake other nodes (notify.go)
	s.growth.shrank(res.Applied)
	return res, nil
}

// rebatch copies b's queries into a new batch. A batch cannot be sent
// twice: sending it records, in each queued query, the prepared statement
// it used on that connection, and a retry may run on another one.
func rebatch(b *pgx.Batch) *pgx.Batch {
	out := &pgx.Batch{}
	for _, q := range b.QueuedQueries {
		out.Queue(q.SQL, q.Arguments...)
	}
	return out
}

// completeRead reads the answers of DeliveryCompleteMany's batch.
func completeRead(br pgx.BatchResults, generic bool, rounds [][]store.DeliveryOutcome, res *store.DeliveryCompleteManyResult,
	health, disables, paused bool, events *eventBatch, evs []store.EventInsert) error {
	if generic {
		if _, err := br.Exec(); err != nil { // genericPlansSQL
			return err
		}
	}
	for _, round := range rounds {
		if _, err := br.Exec(); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		applied, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		done := make(map[string]bool, len(applied))
		for _, id := range applied {
			done[id] = true
		}
		res.Record(round, done)
		if _, err := br.Exec(); err != nil { // keysCompleteSQL
			return err
		}
	}
	if health {
		if err := healthRead(br, res); err != nil {
			return err
		}
	}
	if disables {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if res.Disabled, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
	}
	if paused {
		if _, err := br.Exec(); err != nil { // pauseSQL
			return err
		}
	}
	if events != nil {
		if _, err := events.read(br, evs); err != nil {
			return err
		}
	}
	return nil
}

// DeliveryRelease makes in_flight deliveries held by Owner pending again,
// due at Now, without recording an attempt.
func (s *Store) DeliveryRelease(ctx context.Context, params *store.DeliveryReleaseParams) (int, error) {
	const op = "error releasing deliveries"
	if len(params.IDs) == 0 {
		return 0, nil
	}
	db, err := s.db(op)
	if err != nil {
		return 0, err
	}
	// The keys they held are freed in the same statement (ordering.go).
	tag, err := execMoved(ctx, db, `WITH freed AS (`+keysReleaseSQL+`)
		UPDATE deliveries SET state = 'pending', next_attempt_at = $3,
		lease_owner = NULL, lease_until = NULL, updated_at = $3
		WHERE id = ANY($1) AND state = 'in_flight' AND lease_owner = $2`,
		params.IDs, params.LeaseOwner, ms(params.Now))
	if err != nil {
		return 0, mapErr(op, err)
	}
	s.notifyIf(tag.RowsAffected() > 0) // wake other nodes (notify.go)
	return int(tag.RowsAffected()), nil
}

// DeliveryRescue makes deliveries whose lease expired pending again.
func (s *Store) DeliveryRescue(ctx context.Context, params *store.DeliveryRescueParams) (int, error) {
	return s.rescue(ctx, "error rescuing deliveries", "", "lease_until < $1", "holder_until < $1", ms(params.Now))
}

// rescue makes pending, due at $1, the in_flight deliveries that lease
// selects, and frees in the same statement the ordering keys that holder
// selects (the same condition on delivery_keys' holder columns: a key's
// holder has the lease of the delivery holding it, ordering.go). with, if
// set, is a list of common table expressions the conditions may read.
func (s *Store) rescue(ctx context.Context, op, with, lease, holder string, args ...any) (int, error) {
	db, err := s.db(op)
	if err != nil {
		return 0, err
	}
	if with != "" {
		with += ", "
	}
	tag, err := execMoved(ctx, db, `WITH `+with+`freed AS (UPDATE delivery_keys
		SET holder = NULL, holder_owner = NULL, holder_until = NULL
		WHERE holder IS NOT NULL AND `+holder+`)
		UPDATE deliveries SET state = 'pending', next_attempt_at = $1,
		lease_owner = NULL, lease_until = NULL, updated_at = $1
		WHERE state = 'in_flight' AND `+lease, args...)
	if err != nil {
		return 0, mapErr(op, err)
	}
	s.notifyIf(tag.RowsAffected() > 0) // wake other nodes (notify.go)
	return int(tag.RowsAffected()), nil
}

// DeliveryRetry puts one finished delivery back in tier 0.
func (s *Store) DeliveryRetry(ctx context.Context, params *store.DeliveryRetryParams) (*herald.Delivery, error) {
	now := ms(params.Now)
	var out *herald.Delivery
	err := s.inTx(ctx, "error retrying delivery", func(tx pgx.Tx) error {
		var state string
		var subDeleted bool
		err := tx.QueryRow(ctx, `SELECT d.state, s.id IS NULL OR s.deleted_at IS NOT NULL
			FROM deliveries d LEFT JOIN subscriptions s ON s.id = d.subscription_id
			WHERE d.id = $1 FOR UPDATE OF d`, params.ID).Scan(&state, &subDeleted)
		if errors.Is(err, pgx.ErrNoRows) {
			return herald.NotFoundf("delivery %s not found", params.ID)
		}
		if err != nil {
			return err
		}
		if !herald.DeliveryState(state).Finished() {
			return herald.Conflictf("delivery %s is %s", params.ID, state)
		}
		if subDeleted {
			return herald.Conflictf("the subscription of delivery %s was deleted", params.ID)
		}
		out, err = scanDelivery(tx.QueryRow(ctx, `UPDATE deliveries SET state = 'pending', tier = 0,
			next_attempt_at = $2, lease_owner = NULL, lease_until = NULL, updated_at = $2
			WHERE id = $1 RETURNING `+deliveryColumns, params.ID, now))
		return err
	})
	if err != nil {
		return nil, err
	}
	s.notifyWork(store.TierBit(0)) // redriven to tier 0; wake other nodes (notify.go)
	return out, nil
}

// DeadLetterRedrive puts a subscription's dead deliveries that died in
// [Since, Until) back in tier 0. A deleted subscription has nothing to
// redrive: its deliveries could never be claimed.
func (s *Store) DeadLetterRedrive(ctx context.Context, params *store.DeadLetterRedriveParams) (int, error) {
	const op = "error redriving dead letters"
	db, err := s.db(op)
	if err != nil {
		return 0, err
	}
	where, args := deadLetterWhere(params)
	limit := ""
	if params.Limit > 0 {
		// The ones that died first go first, so successive calls walk the
		// backlog in order (deliveries_dead_idx).
		limit = " ORDER BY d.updated_at, d.id LIMIT " + strconv.Itoa(params.Limit)
	}
	args = append(args, ms(params.Now))
	now := "$" + strconv.Itoa(len(args))
	tag, err := execMoved(ctx, db, `UPDATE deliveries SET state = 'pending', tier = 0, next_attempt_at = `+now+`,
		lease_owner = NULL, lease_until = NULL, updated_at = `+now+`
		WHERE state = 'dead' AND id IN (SELECT d.id FROM deliveries d WHERE `+where+limit+`)`, args...)
	if err != nil {
		return 0, mapErr(op, err)
	}
	s.notifyIf(tag.RowsAffected() > 0) // wake other nodes (notify.go)
	return int(tag.RowsAffected()), nil
}

// deadLetterWhere is the condition (on alias d) DeadLetterRedrive and
// DeadLetterCount share: the subscription's dead letters in the window
// that can be redriven (its subscription is not deleted).
func deadLetterWhere(params *store.DeadLetterRedriveParams) (string, []any) {
	q := conds{where: `d.subscription_id = $1 AND d.state = 'dead'
		AND EXISTS (SELECT 1 FROM subscriptions s WHERE s.id = $1 AND s.deleted_at IS NULL)`,
		args: []any{params.SubscriptionID}}
	add := q.add
	if !params.Since.IsZero() {
		add("d.updated_at >=", ms(params.Since))
	}
	if !params.Until.IsZero() {
		add("d.updated_at <", ms(params.Until))
	}
	if params.Error != "" {
		add("d.last_error =", string(params.Error))
	}
	return q.where, q.args
}

// conds builds a WHERE clause from the filters actually set, numbering
// the placeholders, so each combination of filters gets a plan that uses
// its own index (a generic plan for "$1 = ” OR col = $1" would not).
type conds struct {
	where string
	args  []any
}

// add appends "AND <cond> $n" with v as $n; cond ends in its operator.
func (c *conds) add(cond string, v any) {
	c.where += " AND " + cond + " " + c.arg(v)
}

// arg binds v and returns its placeholder.
func (c *conds) arg(v any) string {
	c.args = append(c.args, v)
	return "$" + strconv.Itoa(len(c.args))
}
