package postgres

import (
	"context"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// claimSQL leases up to @limit due deliveries of one tier, fairly across
// subscriptions, in one statement. It is assembled here, in throttle.go and
// in ordering.go; testdata/claim*.sql hold it and the claim's other
// statements as they run (TestClaimSQLGolden).
//
//   - ranked: for each enabled subscription, at most @share (<= @limit) of
//     its due rows, read in order from the partial pending index (LATERAL …
//     LIMIT), ranked 1, 2, 3… within the subscription. The cost is one index probe per
//     enabled subscription plus the due rows read, never the backlog.
//   - picked: round-robin order — every subscription's first row, then every
//     second row, … — which is the fairness rule of DeliveryClaimParams.
//     Within one rank, with RotateAfter set, subscriptions after it (by id)
//     come first, then the rest from the start (wrap-around), so successive
//     small claims visit every subscription in turn; without it the row
//     waiting longest comes first (next_attempt_at, id). The best 4×@limit
//     are kept: room for concurrent claims to skip each other's rows, and
//     few enough that the planner looks each one up by primary key rather
//     than hashing the whole table.
//   - locked: walks the candidates in picked order and locks the first
//     @limit still pending, skipping rows another transaction holds (SKIP
//     LOCKED), so a concurrent claim moves past them instead of coming back
//     short. The state re-check runs on the newest row version, so a row
//     claimed and committed by another node since this statement's snapshot
//     is left out: no delivery is ever claimed twice.
//   - claimed marks them in_flight with the lease and returns each joined
//     with its event (= ANY(ARRAY(…)) keeps that an index lookup per row).
//
// The answer has one row per claimed delivery, or one row of NULLs when
// none was claimed; every row carries the number of candidates, so the
// caller can tell "nothing due" from "lost the race for what was due".
//
// The lease is store.DeliveryClaimParams.LeaseFor's, computed per row.
//
// claimPlainSQL is the same claim for when no subscription had a rate
// limit or an in-flight cap (orderedCache): it leaves such subscriptions
// out altogether, so it never spends a budget and needs no throttle lock
// (one limited since, on another node, is claimed by claimSQL once the
// cache sees it, within orderedCacheTTL), and a paused one while its pause
// lasts; it has none of the budget arithmetic to plan or run.
var (
	claimSQL      = claimStatement(true)
	claimPlainSQL = claimStatement(false)
)

func claimStatement(throttled bool) string {
	capJoin, started := "", ""
	capFilter := "\n\t  AND NOT " + limitedPredicate + " AND (s.paused_until IS NULL OR s.paused_until <= @now::timestamptz)"
	if throttled {
		capJoin = `
	-- The throttle's cap (throttle.go): @share unless throttled.
	CROSS JOIN LATERAL (SELECT ` + claimCapSQL + ` AS cap) b`
		capFilter = "\n\t  AND c.rnk_in_sub <= b.cap"
		started = ", " + throttleStartedSQL
	}
	return `
WITH ranked AS (
	SELECT c.id, c.tid, c.subscription_id, c.next_attempt_at,
		row_number() OVER (PARTITION BY c.subscription_id ORDER BY c.next_attempt_at, c.id) AS rnk
	FROM subscriptions s` + capJoin + `
	CROSS JOIN LATERAL (
		SELECT d.id, d.ctid AS tid, d.subscription_id, d.next_attempt_at,
			row_number() OVER (ORDER BY d.next_attempt_at, d.id) AS rnk_in_sub
		FROM deliveries d
		WHERE d.tier = @tier AND d.subscription_id = s.id AND d.state = 'pending'
		  AND d.next_attempt_at <= @now
		ORDER BY d.next_attempt_at, d.id
		LIMIT @share
	) c
	-- fifo and latest subscriptions are claimed per key (ordering.go).
	WHERE s.state = 'enabled' AND s.deleted_at IS NULL AND NOT ` + orderedPredicate + capFilter + `
), picked AS (
	SELECT tid, row_number() OVER (ORDER BY rnk,
		CASE WHEN @rotate_after = '' THEN NULL ELSE subscription_id <= @rotate_after END,
		CASE WHEN @rotate_after = '' THEN NULL ELSE subscription_id END,
		next_attempt_at, id) AS ord
	FROM ranked
	ORDER BY ord
	LIMIT 4 * @limit
), locked AS (
	-- The candidates by their tuple ids in the active partition (where
	-- every pending row is), re-checked on their newest versions. The
	-- state check is spelled so that no index can serve it: a planner
	-- whose statistics said the partition was empty (analyze.go) found
	-- the candidates by id through a full scan of an index the check
	-- could use, 5,000 rows read per candidate; TID lookups are costed by
	-- the ids alone, whatever the statistics say.
	SELECT d.ctid AS tid
	FROM picked p JOIN deliveries_active d ON d.ctid = p.tid
	WHERE d.state IS NOT DISTINCT FROM 'pending' AND d.tier = @tier AND d.next_attempt_at <= @now
	ORDER BY p.ord
	LIMIT @limit
	FOR UPDATE OF d SKIP LOCKED
), claimed AS (
	-- The locked rows by their tuple ids again (TID lookups, as in
	-- locked). Found by id, a planner whose statistics said the partition
	-- was empty walked the whole backlog for the ids, through an index or
	-- sequentially: 40–70 ms a claim during a burst, while a steady stream
	-- beside it waited 6–7 s (issue 28). Each row's subscription is read
	-- per row, not joined, for the same reason. A row another transaction
	-- changed since this statement's snapshot, and left pending, is locked
	-- but not claimed (its newest version is not in the snapshot): the
	-- claim comes back short, as when it loses a race.
	UPDATE deliveries_active d SET
		state = 'in_flight',
		lease_owner = @owner,
		lease_until = greatest(@lease_until::timestamptz, @now::timestamptz
			+ (coalesce((SELECT CASE WHEN s.timeout_ms > 0 THEN s.timeout_ms END FROM subscriptions s WHERE s.id = d.subscription_id),
				@default_timeout_ms) + @margin_ms) * interval '1 millisecond'),
		updated_at = @now
	WHERE d.ctid = ANY (ARRAY(SELECT tid FROM locked)) AND d.state IS NOT DISTINCT FROM 'pending'
	RETURNING d.id, d.event_id, d.subscription_id, d.state, d.tier, d.attempt_count,
		d.next_attempt_at, d.event_key, d.event_version, d.last_status, d.last_error, d.last_message,
		d.created_at, d.updated_at, d.event_tenant, d.lease_until
)` + started + `
SELECT n.candidates, c.*, e.*
FROM (SELECT count(*) AS candidates FROM ranked) n
LEFT JOIN claimed c ON true
-- Each claimed row's event by primary key. A LATERAL … LIMIT 1 is always
-- run per row: joined plainly, a planner without fresh statistics on
-- events (a server with autovacuum off never gathers them) hashed the
-- whole table for every claim.
LEFT JOIN LATERAL (
	SELECT e.id AS e_id, e.type, e.key, e.version, e.data::text AS data, e.created_at AS e_created_at,
		e.tenant AS e_tenant
	FROM events e WHERE e.id = c.event_id AND e.tenant = c.event_tenant LIMIT 1
) e ON true`
}

// customPlansSQL is the first statement of every claim transaction (it
// rides in the first pipeline, throttleLockSQLs): every statement of the
// claim is planned for the table as it is now, never with a cached generic
// plan. A generic plan is made once per connection, after five executions,
// and kept until the table is next analyzed: made while a fresh schema was
// nearly empty, it read deliveries and events with sequential scans, so
// every claim cost time proportional to the whole table (herald bench on
// PostgreSQL: 700 deliveries/s and falling as the table grew). Planning
// the claim costs well under a millisecond.
const customPlansSQL = `SET LOCAL plan_cache_mode = force_custom_plan`

// genericPlansSQL is the first statement of the hot write batches, the
// event insert (EventInsertMany) and the completion (DeliveryCompleteMany),
// each one implicit transaction, when they run on the main pool (on the
// hot-write pool its settings are the session's: smallWrites): their
// statements run with one generic
// plan per connection, made once, instead of being planned at every
// execution (the connection's default, postgres.go). For a small commit
// the planning cost more than the work: 0.23–0.29 ms against 0.09–0.13 ms
// for a one-event insert, 0.12–0.17 ms against 0.03–0.05 ms for a
// one-outcome completion (issue 26). Their every table access is by
// primary key or unique index, an insert, or a function scan of the
// arguments, which is what the plan is for any table size — but a
// generic plan made while a table was nearly empty, kept until the table
// is next analyzed, would read a small table sequentially (what made
// customPlansSQL necessary for claims), so sequential scans are off for
// these statements: the plan made on an empty schema still probes the
// indexes. Both settings end with the batch's transaction.
//
// Only for small batches (genericPlansMax): a generic plan assumes about
// ten rows per argument array, and a custom plan's cost is spread over a
// large batch anyway; with generic plans for every size, a saturated run
// (`herald bench --database-url … --count 30000`) cost PostgreSQL 126–159
// µs per delivery against 93–101 and its p99 doubled.
const genericPlansSQL = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true)`

// genericPlansMax is the most rows (events, deliveries or outcomes) of a
// write batch that runs with genericPlansSQL.
const genericPlansMax = 16

// genericPlans reports whether a write batch of these row counts runs
// with generic plans (smallWrites).
func genericPlans(rows ...int) bool {
	for _, n := range rows {
		if n > genericPlansMax {
			return false
		}
	}
	return true
}

// hotConns is the most connections of the hot-write pool (Store.hot):
// the two ingest committers of a PostgreSQL node, whose one-event commits
// are nearly all of its transactions at steady rates; the completer and
// anything else take one when it is free.
const hotConns = 2

// smallWrites returns where a write batch of these row counts runs and
// whether it must open with genericPlansSQL. A small batch runs on a free
// connection of the hot-write pool, whose session already has
// genericPlansSQL's settings: one statement fewer per transaction, 5% of
// a one-event commit's backend CPU on this project's VM (docs/benchmarks.md,
// issue 26). When both are taken it runs on db with genericPlansSQL, and
// a large batch on db as it is. The check and the acquire are not atomic:
// a batch that loses the last free connection to another waits for one,
// which is held for one round trip.
func (s *Store) smallWrites(db querier, rows ...int) (querier, bool) {
	if !genericPlans(rows...) {
		return db, false
	}
	if st := s.hot.Stat(); st.IdleConns() > 0 || st.TotalConns() < st.MaxConns() {
		return s.hot, false
	}
	return db, true
}

const asyncCommitSQL = `SET LOCAL synchronous_commit = off`

// claimTries bounds the claim statements one DeliveryClaim runs when it
// loses races to concurrent claims.
const claimTries = 3

// prefixedRow scans a row whose first column goes to first and the rest to
// the destinations given to Scan.
type prefixedRow struct {
	pgx.Row
	first any
}

func (r prefixedRow) Scan(dest ...any) error {
	return r.Row.Scan(append([]any{r.first}, dest...)...)
}

// DeliveryClaim leases due deliveries of a tier; see claimSQL. The claim,
// and the read of the claimed subscriptions and their active secrets, run in
// one transaction so a failed read leaves nothing leased.
func (s *Store) DeliveryClaim(ctx context.Context, params *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	if params.Limit <= 0 {
		return []*store.ClaimedDelivery{}, nil
	}
	now := ms(params.Now)
	var out []*store.ClaimedDelivery
	err := s.inTx(ctx, "error claiming deliveries", func(tx pgx.Tx) error {
		out = nil
		subIDs := map[string]bool{}
		// With ordered subscriptions the throttle locks (throttle.go) come
		// before anything else, in the ordered claim's first round trip;
		// otherwise they ride in claimSQL's.
		kinds, err := s.subscriptionKinds(ctx, tx)
		if err != nil {
			return err
		}
		if kinds.exists {
			// Ordered and unordered subscriptions share the claim
			// (ordering.go, claimMixed).
			o, err := s.newOrderedClaim(ctx, tx, params, kinds.limited)
			if err != nil {
				return err
			}
			claimed, err := s.claimMixed(ctx, tx, o)
			if err != nil {
				return err
			}
			out = addClaimed(out, claimed, subIDs)
		} else {
			// One claimSQL shares the whole Limit among the subscriptions
			// (its round-robin order is the water-filling).
			claimed, err := s.claimUnordered(ctx, tx, params, true, kinds.limited, params.Limit, params.Limit)
			if err != nil {
				return err
			}
			out = addClaimed(out, claimed, subIDs)
		}
		if len(out) == 0 {
			return nil
		}
		ids := make([]string, 0, len(subIDs))
		for id := range subIDs {
			ids = append(ids, id)
		}
		// Subscriptions and secrets once per subscription, not per
		// delivery: one more round trip for the whole claim.
		batch := &pgx.Batch{}
		batch.Queue("SELECT "+subscriptionColumns+" FROM subscriptions WHERE id = ANY($1)", ids)
		batch.Queue(`SELECT subscription_id, value, created_at, expires_at FROM subscription_secrets
			WHERE subscription_id = ANY($1) AND (expires_at IS NULL OR expires_at > $2)
			ORDER BY subscription_id, created_at DESC, id DESC`, ids, now)
		br := tx.SendBatch(ctx, batch)
		defer br.Close()
		subRows, err := br.Query()
		if err != nil {
			return err
		}
		subs, err := collectSubscriptions(subRows)
		if err != nil {
			return err
		}
		byID := make(map[string]*herald.Subscription, len(subs))
		for _, sub := range subs {
			byID[sub.ID] = sub
		}
		secRows, err := br.Query()
		if err != nil {
			return err
		}
		secrets := map[string][]herald.Secret{}
		if _, err := collectSecrets(secRows, s.keys, secrets, ""); err != nil {
			return err
		}
		var rateSubs, rateIDs []string // rate-limited deliveries claimed
		for _, c := range out {
			c.Subscription = byID[c.Delivery.SubscriptionID]
			c.Secrets = secrets[c.Delivery.SubscriptionID]
			if c.Subscription != nil && c.Subscription.RateLimit != nil {
				rateSubs, rateIDs = append(rateSubs, c.Subscription.ID), append(rateIDs, c.Delivery.ID)
			}
		}
		if err := br.Close(); err != nil {
			return err
		}
		if len(rateIDs) == 0 {
			return nil
		}
		// The throttle locks are held: the requests start now, however
		// long the claim waited for them after its caller took Now. The
		// starts it recorded at Now move there (throttleRestartSQL), in one
		// more round trip, as late as possible before the commit.
		if start := ms(params.ClaimStart()); start.After(now) {
			_, err := tx.Exec(ctx, throttleRestartSQL, rateSubs, rateIDs, now, start)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// RETURNING has no order; the contract wants next_attempt_at order.
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Delivery, out[j].Delivery
		if !a.NextAttemptAt.Equal(*b.NextAttemptAt) {
			return a.NextAttemptAt.Before(*b.NextAttemptAt)
		}
		return a.ID < b.ID
	})
	if out == nil {
		out = []*store.ClaimedDelivery{}
	}
	return out, nil
}

// claimArgs are claimSQL's arguments for a claim of limit deliveries, at
// most share of each subscription.
func claimArgs(params *store.DeliveryClaimParams, limit, share int) pgx.NamedArgs {
	return pgx.NamedArgs{
		"tier":               params.Tier,
		"now":                ms(params.Now),
		"limit":              limit,
		"share":              share,
		"owner":              params.LeaseOwner,
		"lease_until":        ms(params.LeaseUntil),
		"default_timeout_ms": herald.DefaultTimeout.Milliseconds(),
		"margin_ms":          params.LeaseMargin.Milliseconds(),
		"rotate_after":       params.RotateAfter,
	}
}

// claimUnordered runs claimSQL for up to want deliveries of unordered
// subscriptions, at most share of each (as their budget allows); lock says
// whether the throttle locks are still to be taken (the first statement of
// the transaction). Claims racing on the same rows skip each other's
// locks; when this one came back short only because of that, the racing
// claims have usually committed by the next statement (a fresh snapshot),
// which then sees fresh candidates. Bounded: a short claim is still a
// correct answer.
func (s *Store) claimUnordered(ctx context.Context, tx pgx.Tx, params *store.DeliveryClaimParams, lock, limited bool,
	want, share int) ([]*store.ClaimedDelivery, error) {
	var out []*store.ClaimedDelivery
	for try := 0; try < claimTries && len(out) < want; try++ {
		need := want - len(out)
		rows, err := claimQuery(ctx, tx, try == 0 && lock, limited, claimArgs(params, need, min(share, need)))
		if err != nil {
			return nil, err
		}
		got, candidates := 0, 0
		for rows.Next() {
			if rows.RawValues()[1] == nil {
				// The row of NULLs: nothing claimed.
				if err := rows.Scan(append([]any{&candidates}, make([]any, len(rows.RawValues())-1)...)...); err != nil {
					rows.Close()
					return nil, err
				}
				continue
			}
			var (
				c     store.ClaimedDelivery
				lease time.Time
				ev    herald.Event
				data  string
			)
			d, err := scanDelivery(prefixedRow{rows, &candidates}, &lease, &ev.ID, &ev.Type, &ev.Key, &ev.Version, &data, &ev.CreatedAt, &ev.Tenant)
			if err != nil {
				rows.Close()
				return nil, err
			}
			ev.Data = []byte(data)
			ev.CreatedAt = ev.CreatedAt.UTC()
			c.Delivery, c.Event, c.LeaseUntil = d, &ev, lease.UTC()
			c.Attempt = d.AttemptCount + 1
			out = append(out, &c)
			got++
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if got == need || candidates <= got {
			break // full, or everything due was taken
		}
	}
	return out, nil
}
