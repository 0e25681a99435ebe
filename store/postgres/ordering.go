package postgres

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Per-key ordering (fifo, latest): the claim path of ordered subscriptions
// and the key-state upkeep of completion, release and rescue. The rules are
// store/ordering.go's; store.PlanKey decides, this file reads and writes.
//
// Serialization across nodes: the claim locks each key's delivery_keys row
// (FOR UPDATE SKIP LOCKED: a key another node is deciding right now is left
// to it) before it reads the key's deliveries in a later statement (sent in
// the same pipeline, one round trip), so under READ COMMITTED it sees
// everything committed by the previous holder of the lock. The holder column (set in the claim transaction, cleared by the
// transaction that completes, releases or rescues the delivery) keeps the
// key taken while its delivery is in flight. Key rows are created (INSERT …
// ON CONFLICT DO NOTHING) the first time a key has due work
// (createKeyRowsQuery), before the claim takes any key lock.
//
// Cost: a claim reads a bounded page of each ordered subscription's due
// rows (discoverSQL), not its backlog, and then needs two round trips per
// chunk of keys: locks with the keys' deliveries, then the decisions, whose
// claim statement returns the claimed deliveries with their events.
//
// Unordered subscriptions never come here: claimSQL leaves fifo and latest
// subscriptions out, and whether any exist is cached (orderedCacheTTL), so
// a store without ordered subscriptions pays nothing per claim.

// orderedCacheTTL bounds how long a claim trusts "no ordered subscription
// exists" before asking again. SubscriptionCreate/Update on this node
// invalidate it at once; a subscription made ordered on another node is
// seen within this time.
const orderedCacheTTL = time.Second

// orderedKeyChunk is how many keys of one subscription a claim locks and
// reads per round trip.
const orderedKeyChunk = 256

// orderedPredicate selects fifo and latest subscriptions (alias s).
const orderedPredicate = `(s.ordering IN ('fifo', 'latest'))`

// orderedCache remembers whether ordered subscriptions exist, limited ones
// (limitedPredicate: claimPlainSQL and no throttle lock without) and
// throttled ones (throttledPredicate: limited or ever paused; without,
// the pollers' statements leave out their throttle parts: nextDueSQL,
// statsTiersSQL). Subscription changes and pauses on this node invalidate
// it (orderedInvalidate).
type orderedCache struct {
	checkedAt time.Time // wall clock; zero = unknown
	exists    bool
	limited   bool
	throttled bool
}

func (s *Store) orderedInvalidate() {
	s.orderedMu.Lock()
	s.ordered = orderedCache{}
	s.orderedMu.Unlock()
}

// orderedExist reports whether any fifo or latest subscription exists,
// asking the database at most once per orderedCacheTTL.
func (s *Store) orderedExist(ctx context.Context, tx querier) (bool, error) {
	c, err := s.subscriptionKinds(ctx, tx)
	return c.exists, err
}

// subscriptionKinds reports whether ordered, limited and throttled
// subscriptions exist, asking the database at most once per
// orderedCacheTTL. A subscription limited since on another node is left
// out of claims until then: claimPlainSQL never claims a limited one.
func (s *Store) subscriptionKinds(ctx context.Context, tx querier) (orderedCache, error) {
	s.orderedMu.Lock()
	c := s.ordered
	s.orderedMu.Unlock()
	if !c.checkedAt.IsZero() && time.Since(c.checkedAt) < orderedCacheTTL {
		return c, nil
	}
	started := time.Now()
	c = orderedCache{checkedAt: started}
	if err := tx.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM subscriptions s WHERE `+orderedPredicate+` AND s.deleted_at IS NULL),
		EXISTS (SELECT 1 FROM subscriptions s WHERE `+limitedPredicate+` AND s.deleted_at IS NULL),
		EXISTS (SELECT 1 FROM subscriptions s WHERE `+throttledPredicate+` AND s.deleted_at IS NULL)`).Scan(&c.exists, &c.limited, &c.throttled); err != nil {
		return orderedCache{}, err
	}
	s.orderedMu.Lock()
	if s.ordered.checkedAt.IsZero() || s.ordered.checkedAt.Before(started) {
		s.ordered = c
	}
	s.orderedMu.Unlock()
	return c, nil
}

// throttledChoice returns unthrottled while no throttled subscription
// exists (subscriptionKinds) and throttled otherwise, with whether any
// does: a poller's statement without its throttle parts (nextDueSQL,
// statsTiersSQL).
func (s *Store) throttledChoice(ctx context.Context, q querier, unthrottled, throttled string) (string, bool, error) {
	kinds, err := s.subscriptionKinds(ctx, q)
	if err != nil || !kinds.throttled {
		return unthrottled, false, err
	}
	return throttled, true, nil
}

// orderedSub is an ordered subscription with due work in the claimed tier.
type orderedSub struct {
	id       string
	ordering herald.Ordering
	interval time.Duration
	lease    time.Time
	keys     []string // keys with due work, oldest due first ("" = keyless)
	next     int      // keys[:next] are decided
	got      int
	// Discovery paging: the last due row read, and whether more may follow.
	afterAt time.Time
	afterID string
	more    bool
	seen    map[string]bool
	// done: the subscription came back short of what it was asked in
	// this claim (no claimable key left, or out of budget).
	done bool
	// cap is the throttle budget left in this claim (-1: not throttled);
	// read with the discovery (after the throttle locks), spent by
	// throttleOrderedClaimed (throttle.go).
	cap int
}

// orderedClaim is the ordered part of one DeliveryClaim.
type orderedClaim struct {
	params  *store.DeliveryClaimParams
	now     time.Time
	subs    []*orderedSub
	claimed []*store.ClaimedDelivery
	// keyRows: the delivery_keys rows of the discovered keys are still to
	// be created; the first key-lock round trip does it first.
	keyRows bool
	// unordered are the unordered subscriptions with due work when the
	// claim started, in id order (claimSQL has something to do).
	unordered []string
	// limited: a subscription may be rate- or in-flight-limited
	// (subscriptionKinds), so the throttle locks were taken; without,
	// limited ones are left out.
	limited bool
}

// orderedPage is how many due rows of a subscription one discovery round
// trip reads, and orderedKeysWanted how many claimable-looking keys the
// discovery wants before it stops paging: enough for a claim of limit when
// a few keys turn out blocked or taken by another claim.
func orderedPage(limit int) int       { return max(4*orderedKeysWanted(limit), 256) }
func orderedKeysWanted(limit int) int { return limit + limit/2 + 16 }

// discoverPageSQL is the next page of a subscription's due rows (alias s),
// in claim order, from the pending index.
const discoverPageSQL = `SELECT d.event_key, d.next_attempt_at, d.id FROM deliveries d
		WHERE d.tier = @tier AND d.subscription_id = s.id AND d.state = 'pending' AND d.next_attempt_at <= @now::timestamptz
		  AND (@after_id = '' OR (d.next_attempt_at, d.id) > (@after_at::timestamptz, @after_id))
		ORDER BY d.next_attempt_at, d.id LIMIT @page`

// discoverSQL finds the ordered subscriptions with due work in the tier
// (all of them, or @sub), with their throttle budget (-1: not throttled;
// read after the throttle locks) and one page of their due rows: the page's
// size and last row, and its keys in order of first due row. Keys that
// cannot be claimed now are left out: keys held by a delivery in flight or
// inside their key interval (PlanKey's Blocked), and fifo keys whose head
// (earliest unfinished delivery) is not a due pending one of this tier. So
// the keys of the first pages are claimable but for races, and a claim that
// comes back short has seen every due row (keyless ones included): the
// engine's NextDue then has no due delivery the claim left behind to wake
// for. The skips and supersedes of a key left out wait for the claim that
// examines it. The cost is one page of the pending index per subscription
// and two index probes per key, never the backlog.
const discoverSQL = `SELECT s.id, s.ordering, s.key_interval_ms, s.timeout_ms, b.cap, pg.n, pg.last_at, pg.last_id, ks.keys
FROM subscriptions s
CROSS JOIN LATERAL (SELECT CASE WHEN ` + limitedPredicate + ` OR s.paused_until > @now::timestamptz
	THEN ` + throttleBudgetSQL + ` ELSE -1 END AS cap) b
CROSS JOIN LATERAL (
	SELECT count(*) AS n,
		(array_agg(r.next_attempt_at ORDER BY r.next_attempt_at DESC, r.id DESC))[1] AS last_at,
		(array_agg(r.id ORDER BY r.next_attempt_at DESC, r.id DESC))[1] AS last_id
	FROM (` + discoverPageSQL + `) r
) pg
CROSS JOIN LATERAL (
	SELECT coalesce(array_agg(g.event_key ORDER BY g.at, g.id), '{}') AS keys
	FROM (SELECT r.event_key, min(r.next_attempt_at) AS at, min(r.id) AS id
		FROM (` + discoverPageSQL + `) r GROUP BY r.event_key) g
	WHERE g.event_key = '' OR (
		NOT EXISTS (SELECT 1 FROM delivery_keys k
			WHERE k.subscription_id = s.id AND k.event_key = g.event_key AND (k.holder IS NOT NULL
				OR (s.key_interval_ms > 0 AND k.last_sent_at + s.key_interval_ms * interval '1 millisecond' > @now::timestamptz)))
		AND (s.ordering <> 'fifo' OR coalesce((
			SELECT h.state = 'pending' AND h.tier = @tier AND h.next_attempt_at <= @now::timestamptz
			FROM deliveries h
			WHERE h.subscription_id = s.id AND h.event_key = g.event_key AND h.event_key <> ''
			  AND h.state IN ('pending', 'in_flight')
			ORDER BY h.seq, h.created_at, h.id LIMIT 1), false)))
) ks
WHERE s.state = 'enabled' AND s.deleted_at IS NULL AND ` + orderedPredicate + `
  AND (@sub = '' OR s.id = @sub) AND pg.n > 0
  -- Without the throttle locks (no subscription was limited), a limited
  -- subscription is left out, as in claimPlainSQL.
  AND (@limited OR NOT ` + limitedPredicate + `)
ORDER BY s.id`

// unorderedDueSQL: the unordered subscriptions with due work in @tier, in
// id order (one probe of the pending index each).
const unorderedDueSQL = `SELECT coalesce(array_agg(s.id ORDER BY s.id), '{}') FROM subscriptions s
	CROSS JOIN LATERAL (SELECT 1 FROM deliveries d
		WHERE d.tier = @tier AND d.subscription_id = s.id AND d.state = 'pending' AND d.next_attempt_at <= @now::timestamptz
		LIMIT 1) n
	WHERE s.state = 'enabled' AND s.deleted_at IS NULL AND NOT ` + orderedPredicate

// discoverArgs are the named arguments of discoverSQL.
func (o *orderedClaim) discoverArgs(sub *orderedSub) pgx.NamedArgs {
	args := pgx.NamedArgs{"tier": o.params.Tier, "now": o.now, "page": orderedPage(o.params.Limit),
		"throttle_margin_ms": store.ThrottleMargin.Milliseconds(), "sub": "", "after_at": time.Time{}, "after_id": "",
		"limited": o.limited}
	if sub != nil {
		args["sub"], args["after_at"], args["after_id"] = sub.id, sub.afterAt, sub.afterID
	}
	return args
}

// readDiscovery reads discoverSQL's rows: it creates the orderedSubs when
// subs is nil, else adds the page to the matching one.
func (o *orderedClaim) readDiscovery(rows pgx.Rows) error {
	defer rows.Close()
	params := o.params
	for rows.Next() {
		var (
			id, ordering        string
			intervalMS, timeout int64
			cap                 int
			n                   int
			lastAt              time.Time
			lastID              string
			keys                []string
		)
		if err := rows.Scan(&id, &ordering, &intervalMS, &timeout, &cap, &n, &lastAt, &lastID, &keys); err != nil {
			return err
		}
		var sub *orderedSub
		for _, s := range o.subs {
			if s.id == id {
				sub = s
			}
		}
		if sub == nil {
			sub = &orderedSub{id: id, ordering: herald.Ordering(ordering), interval: msDuration(intervalMS),
				cap: cap, seen: map[string]bool{}}
			sub.lease = ms(params.LeaseFor(&herald.Subscription{TimeoutMS: timeout}))
			o.subs = append(o.subs, sub)
		}
		sub.afterAt, sub.afterID, sub.more = lastAt, lastID, n >= orderedPage(params.Limit)
		for _, k := range keys {
			if !sub.seen[k] {
				sub.seen[k] = true
				sub.keys = append(sub.keys, k)
			}
		}
	}
	return rows.Err()
}

// discoverMore pages on, before any key is locked, for the subscriptions
// whose first page held too few keys (many rows per key, or keys left out).
func (o *orderedClaim) discoverMore(ctx context.Context, tx pgx.Tx) error {
	wanted := orderedKeysWanted(o.params.Limit)
	for range 8 {
		batch := &pgx.Batch{}
		for _, sub := range o.subs {
			if sub.more && len(sub.keys) < wanted {
				batch.Queue(discoverSQL, o.discoverArgs(sub))
				// Until its page says otherwise (an empty page has no row).
				sub.more = false
			}
		}
		if batch.Len() == 0 {
			return nil
		}
		br := tx.SendBatch(ctx, batch)
		for range batch.Len() {
			rows, err := br.Query()
			if err == nil {
				err = o.readDiscovery(rows)
			}
			if err != nil {
				br.Close()
				return err
			}
		}
		if err := br.Close(); err != nil {
			return err
		}
	}
	return nil
}

// newOrderedClaim finds the ordered subscriptions with due work in the
// tier and their keys (a bounded discovery, discoverSQL). One round trip
// takes the throttle locks (throttleLockSQLs, which come before anything
// else), asks which unordered subscriptions have due work, and reads the
// first page of every ordered subscription.
func (s *Store) newOrderedClaim(ctx context.Context, tx pgx.Tx, params *store.DeliveryClaimParams, limited bool) (*orderedClaim, error) {
	o := &orderedClaim{params: params, now: ms(params.Now), keyRows: true, limited: limited}
	lockArgs := pgx.NamedArgs{"tier": params.Tier, "now": o.now, "throttle_margin_ms": store.ThrottleMargin.Milliseconds()}
	batch := &pgx.Batch{}
	locks := claimLockSQLs(limited)
	for _, q := range locks {
		batch.Queue(q, lockArgs)
	}
	batch.Queue(unorderedDueSQL, lockArgs)
	batch.Queue(discoverSQL, o.discoverArgs(nil))
	br := tx.SendBatch(ctx, batch)
	defer br.Close()
	for range locks {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	if err := br.QueryRow().Scan(&o.unordered); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	if err := o.readDiscovery(rows); err != nil {
		return nil, err
	}
	if err := br.Close(); err != nil {
		return nil, err
	}
	if len(o.subs) == 0 {
		return o, nil
	}
	if err := o.discoverMore(ctx, tx); err != nil {
		return nil, err
	}
	// Round-robin like the unordered claim: subscriptions after
	// RotateAfter first.
	if r := params.RotateAfter; r != "" {
		sort.SliceStable(o.subs, func(i, j int) bool { return o.subs[i].id > r && o.subs[j].id <= r })
	}
	return o, nil
}

// claimSub claims up to want deliveries of one subscription: keyless due
// ones directly, and for its keys (oldest due first, a chunk at a time)
// what PlanKey allows.
func (o *orderedClaim) claimSub(ctx context.Context, tx pgx.Tx, sub *orderedSub, want int) (int, error) {
	got := 0
	for got < want && sub.next < len(sub.keys) {
		if sub.keys[sub.next] == "" {
			need := want - got
			n, err := o.claimKeyless(ctx, tx, sub, need)
			if err != nil {
				return got, err
			}
			got += n
			if n < need {
				sub.next++ // keyless exhausted
			}
			continue
		}
		end := sub.next
		// Discovery left out the keys known to be blocked, so a chunk a
		// little larger than what is still wanted usually fills it.
		chunkLen := min(want-got+(want-got)/4+4, orderedKeyChunk)
		for end < len(sub.keys) && end-sub.next < chunkLen && sub.keys[end] != "" {
			end++
		}
		chunk := sub.keys[sub.next:end]
		n, used, err := o.claimKeys(ctx, tx, sub, chunk, want-got)
		if err != nil {
			return got, err
		}
		got += n
		sub.next += used
	}
	return got, nil
}

// claimedColumns are the columns of a claimed delivery and its event
// (scanClaimed), from aliases l (the leased delivery) and e.
const claimedColumns = `l.id, l.event_id, l.subscription_id, l.state, l.tier, l.attempt_count,
	l.next_attempt_at, l.event_key, l.event_version, l.last_status, l.last_error, l.last_message,
	l.created_at, l.updated_at, l.event_tenant, l.lease_until, e.id, e.type, e.key, e.version, e.data::text, e.created_at, e.tenant`

// scanClaimed reads rows of claimedColumns.
func scanClaimed(rows pgx.Rows) ([]*store.ClaimedDelivery, error) {
	defer rows.Close()
	var out []*store.ClaimedDelivery
	for rows.Next() {
		var (
			lease time.Time
			ev    herald.Event
			data  string
		)
		d, err := scanDelivery(rows, &lease, &ev.ID, &ev.Type, &ev.Key, &ev.Version, &data, &ev.CreatedAt, &ev.Tenant)
		if err != nil {
			return nil, err
		}
		ev.Data, ev.CreatedAt = []byte(data), ev.CreatedAt.UTC()
		out = append(out, &store.ClaimedDelivery{Delivery: d, Event: &ev, Attempt: d.AttemptCount + 1, LeaseUntil: lease.UTC()})
	}
	return out, rows.Err()
}

// claimKeyless leases keyless due deliveries (unordered in every mode).
func (o *orderedClaim) claimKeyless(ctx context.Context, tx pgx.Tx, sub *orderedSub, n int) (int, error) {
	rows, err := tx.Query(ctx, `WITH l AS (
			UPDATE deliveries SET state = 'in_flight', lease_owner = $4, lease_until = $5, updated_at = $3
			WHERE id = ANY (ARRAY(SELECT d.id FROM deliveries d
				WHERE d.tier = $1 AND d.subscription_id = $2 AND d.state = 'pending' AND d.next_attempt_at <= $3
				  AND d.event_key = ''
				ORDER BY d.next_attempt_at, d.id LIMIT $6 FOR UPDATE SKIP LOCKED)) AND `+stillPending("deliveries")+`
			RETURNING *)
		SELECT `+claimedColumns+` FROM l JOIN events e ON e.id = l.event_id AND e.tenant = l.event_tenant`,
		o.params.Tier, sub.id, o.now, o.params.LeaseOwner, sub.lease, n)
	if err != nil {
		return 0, err
	}
	claimed, err := scanClaimed(rows)
	if err != nil {
		return 0, err
	}
	return len(claimed), o.add(ctx, tx, sub, claimed)
}

// add records leased deliveries (and spends the throttle budget).
func (o *orderedClaim) add(ctx context.Context, tx pgx.Tx, sub *orderedSub, claimed []*store.ClaimedDelivery) error {
	o.claimed = append(o.claimed, claimed...)
	if sub.cap < 0 || len(claimed) == 0 {
		return nil
	}
	ids := make([]string, len(claimed))
	for i, c := range claimed {
		ids[i] = c.Delivery.ID
	}
	return throttleOrderedClaimed(ctx, tx, sub, ids, o.now)
}

// keyLockSQL locks the key rows no other claim holds (the rest is another
// node's to decide) and returns their state.
const keyLockSQL = `SELECT event_key, ` + keyStateColumns + `
	FROM delivery_keys WHERE subscription_id = $1 AND event_key = ANY($2)
	ORDER BY event_key FOR UPDATE SKIP LOCKED`

// claimKeys decides a chunk of keys (sorted for locking), claiming at most
// n deliveries; it returns how many it claimed and how many keys of the
// chunk it decided (a prefix, in chunk order). Two round trips: the key
// locks with the read of the keys' deliveries (pipelined: the read is a
// later statement, so its snapshot has every commit of the previous lock
// holders), then the decisions, whose claim statement returns the claimed
// deliveries with their events. The read covers the whole chunk; only the
// locked keys' rows are used.
func (o *orderedClaim) claimKeys(ctx context.Context, tx pgx.Tx, sub *orderedSub, chunk []string, n int) (int, int, error) {
	sorted := append([]string(nil), chunk...)
	sort.Strings(sorted)
	batch := &pgx.Batch{}
	if o.keyRows {
		// Every discovered key's row, before the first key lock.
		o.keyRows = false
		if q, args := createKeyRowsQuery(o.subs); q != "" {
			batch.Queue(q, args...)
		}
	}
	batch.Queue(keyLockSQL, sub.id, sorted)
	batch.Queue(readKeyDeliveriesSQL, sub.id, sorted)
	br := tx.SendBatch(ctx, batch)
	for range batch.Len() - 2 {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return 0, 0, err
		}
	}
	states := map[string]*store.KeyState{}
	rows, err := br.Query()
	if err == nil {
		err = scanKeyStates(rows, states)
	}
	var byKey map[string][]store.KeyDelivery
	if err == nil {
		rows, err = br.Query()
		if err == nil {
			byKey, err = scanKeyDeliveries(rows)
		}
	}
	if err != nil {
		br.Close()
		return 0, 0, err
	}
	if err := br.Close(); err != nil {
		return 0, 0, err
	}
	var skip, supersede, claim []string
	used := 0
	for _, k := range chunk {
		if len(claim) >= n {
			break
		}
		used++
		st := states[k]
		if st == nil || st.Held { // a held key has nothing to claim; skip/supersede waits for its turn
			continue
		}
		plan := store.PlanKey(sub.ordering, sub.interval, st, byKey[k], o.now)
		skip = append(skip, plan.Skip...)
		supersede = append(supersede, plan.Supersede...)
		if plan.Claimable(o.params.Tier, o.now) {
			claim = append(claim, plan.Next)
		}
	}
	batch = &pgx.Batch{}
	if len(skip) > 0 {
		batch.Queue(finishUnsentSQL, skip, string(herald.DeliverySkipped), o.now)
	}
	if len(supersede) > 0 {
		batch.Queue(finishUnsentSQL, supersede, string(herald.DeliverySuperseded), o.now)
	}
	if len(claim) > 0 {
		// Lease and take the key in one statement; only what was leased
		// (still pending) and took its key counts, whatever was decided.
		batch.Queue(`WITH l AS (
				UPDATE deliveries SET state = 'in_flight', lease_owner = $2, lease_until = $3, updated_at = $4
				WHERE id = ANY($1) AND `+stillPending("deliveries")+` AND subscription_id = $5
				RETURNING *),
			k AS (
				UPDATE delivery_keys k SET holder = l.id, holder_owner = $2, holder_until = $3, last_sent_at = $6
				FROM l WHERE k.subscription_id = $5 AND k.event_key = l.event_key
				RETURNING k.holder)
			SELECT `+claimedColumns+` FROM l JOIN k ON k.holder = l.id JOIN events e ON e.id = l.event_id AND e.tenant = l.event_tenant`,
			claim, o.params.LeaseOwner, sub.lease, o.now, sub.id, ms(o.params.KeySentAt()))
	}
	var claimed []*store.ClaimedDelivery
	if batch.Len() > 0 {
		br := tx.SendBatch(ctx, batch)
		for i := 0; i < batch.Len()-1; i++ {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return 0, 0, err
			}
		}
		if len(claim) > 0 {
			rows, err := br.Query()
			if err == nil {
				claimed, err = scanClaimed(rows)
			}
			if err != nil {
				br.Close()
				return 0, 0, err
			}
		} else if _, err := br.Exec(); err != nil {
			br.Close()
			return 0, 0, err
		}
		if err := br.Close(); err != nil {
			return 0, 0, err
		}
	}
	if err := o.add(ctx, tx, sub, claimed); err != nil {
		return 0, 0, err
	}
	return len(claimed), used, nil
}

// keyStateColumns are the columns of delivery_keys scanKeyState reads.
const keyStateColumns = `holder, last_version, last_pos_seq, last_pos_at, last_pos_id, last_sent_at`

// scanKeyStates reads keyLockSQL's rows into states.
func scanKeyStates(rows pgx.Rows, states map[string]*store.KeyState) error {
	defer rows.Close()
	for rows.Next() {
		var key string
		st, err := scanKeyState(rows, &key)
		if err != nil {
			return err
		}
		states[key] = st
	}
	return rows.Err()
}

// scanKeyState scans keyStateColumns, preceded by the key when key is not
// nil.
func scanKeyState(row pgx.Row, key *string) (*store.KeyState, error) {
	var (
		holder, posID *string
		posAt         *time.Time
		st            store.KeyState
	)
	dest := []any{&holder, &st.LastVersion, &st.LastPosSeq, &posAt, &posID, &st.LastSentAt}
	if key != nil {
		dest = append([]any{key}, dest...)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	st.Held = holder != nil
	if posAt != nil {
		st.LastPosAt = posAt.UTC()
	}
	if posID != nil {
		st.LastPosID = *posID
	}
	return &st, nil
}

// finishUnsentSQL moves pending deliveries to skipped or superseded.
var finishUnsentSQL = `UPDATE deliveries SET state = $2, next_attempt_at = NULL, updated_at = $3
	WHERE id = ANY($1) AND ` + stillPending("deliveries")

// readKeyDeliveriesSQL reads the unfinished deliveries of keys ($2) of a
// subscription ($1), each key's in publish order (seq, created_at, id;
// store/ordering.go): one index range per key (LATERAL, index
// deliveries_key_order_idx), whatever the planner thinks of the table — a
// key's unfinished deliveries are a handful of rows, the subscription's
// history may be millions.
const readKeyDeliveriesSQL = `SELECT k.key, d.id, d.state, d.tier, d.next_attempt_at, d.event_version, d.seq, d.created_at
	FROM unnest($2::text[]) AS k(key)
	CROSS JOIN LATERAL (
		SELECT d.id, d.state, d.tier, d.next_attempt_at, d.event_version, d.seq, d.created_at FROM deliveries d
		WHERE d.subscription_id = $1 AND d.event_key = k.key AND d.event_key <> ''
		  AND d.state IN ('pending', 'in_flight')
		ORDER BY d.seq, d.created_at, d.id) d`

// readKeyDeliveries reads the unfinished deliveries of keys, each key's in
// publish order.
func readKeyDeliveries(ctx context.Context, q querier, subID string, keys []string) (map[string][]store.KeyDelivery, error) {
	if len(keys) == 0 {
		return map[string][]store.KeyDelivery{}, nil
	}
	rows, err := q.Query(ctx, readKeyDeliveriesSQL, subID, keys)
	if err != nil {
		return nil, err
	}
	return scanKeyDeliveries(rows)
}

// scanKeyDeliveries reads readKeyDeliveriesSQL's rows.
func scanKeyDeliveries(rows pgx.Rows) (map[string][]store.KeyDelivery, error) {
	defer rows.Close()
	out := map[string][]store.KeyDelivery{}
	for rows.Next() {
		var (
			key   string
			d     store.KeyDelivery
			state string
		)
		if err := rows.Scan(&key, &d.ID, &state, &d.Tier, &d.NextAttemptAt, &d.Version, &d.Seq, &d.CreatedAt); err != nil {
			return nil, err
		}
		d.State, d.NextAttemptAt, d.CreatedAt = herald.DeliveryState(state), utcPtr(d.NextAttemptAt), d.CreatedAt.UTC()
		out[key] = append(out[key], d)
	}
	return out, rows.Err()
}

// readKeyState reads one key's state without locking (visibility).
func readKeyState(ctx context.Context, q querier, subID, key string) (*store.KeyState, error) {
	st, err := scanKeyState(q.QueryRow(ctx, `SELECT `+keyStateColumns+`
		FROM delivery_keys WHERE subscription_id = $1 AND event_key = $2`, subID, key), nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return &store.KeyState{}, nil
	}
	return st, err
}

// claimMixed is the claim when ordered subscriptions exist: the
// water-filling of DeliveryClaimParams over both kinds, each subscription
// one share. Ordered ones are claimed here, key by key (claimSub); the
// unordered ones together by claimSQL, at most a share each (@share). Each
// round asks every subscription still in the running for floor(left/k)
// more; one that comes back short is out, and what it left is split again
// over the others. Once that split is below one each, one more goes to
// each of the first left subscriptions in turn (remainderTurn); once no
// ordered one is left, one claimSQL takes the rest. Each round fills the
// claim or drops a subscription, so there are at most k+1 rounds, in
// practice two. The throttle locks are already held
// (newOrderedClaim took them).
func (s *Store) claimMixed(ctx context.Context, tx pgx.Tx, o *orderedClaim) ([]*store.ClaimedDelivery, error) {
	params := o.params
	var out []*store.ClaimedDelivery
	unordered := o.unordered // still in the running
	for left := params.Limit; left > 0; {
		var ordered []*orderedSub
		for _, sub := range o.subs {
			if !sub.done {
				ordered = append(ordered, sub)
			}
		}
		k := len(ordered) + len(unordered)
		if k == 0 {
			break
		}
		per, unorderedWant := left/k, 0
		if len(ordered) == 0 {
			// claimSQL's round-robin order alone is the water-filling.
			per, unorderedWant = left, left
		} else if per > 0 {
			unorderedWant = per * len(unordered)
		} else {
			per = 1
			ordered, unorderedWant = remainderTurn(ordered, unordered, params.RotateAfter, left)
		}
		got := 0
		for _, sub := range ordered {
			n, err := o.claimUpTo(ctx, tx, sub, per)
			if err != nil {
				return nil, err
			}
			got += n
		}
		out = append(out, o.take()...)
		left -= got
		if want := min(unorderedWant, left); want > 0 {
			claimed, err := s.claimUnordered(ctx, tx, params, false, o.limited, want, per)
			if err != nil {
				return nil, err
			}
			out = append(out, claimed...)
			got += len(claimed)
			left -= len(claimed)
			if len(claimed) < want || want == per*len(unordered) {
				// Whoever got less than asked is out (a remainder turn
				// that came back short gave every one with work its one).
				bySub := map[string]int{}
				for _, c := range claimed {
					bySub[c.Delivery.SubscriptionID]++
				}
				var kept []string
				for _, id := range unordered {
					if bySub[id] >= per { // more: a retry after a lost race
						kept = append(kept, id)
					}
				}
				unordered = kept
			}
		}
		if got == 0 {
			break
		}
	}
	return out, nil
}

// remainderTurn picks the first n subscriptions in turn — those after
// rotateAfter (by id) first, then the rest from the start — and returns
// the ordered ones among them and how many unordered ones. (claimSQL
// picks which unordered ones: the same turn when rotateAfter is set, the
// longest waiting otherwise.)
func remainderTurn(ordered []*orderedSub, unordered []string, rotateAfter string, n int) ([]*orderedSub, int) {
	type turn struct {
		id  string
		sub *orderedSub
	}
	all := make([]turn, 0, len(ordered)+len(unordered))
	for _, sub := range ordered {
		all = append(all, turn{id: sub.id, sub: sub})
	}
	for _, id := range unordered {
		all = append(all, turn{id: id})
	}
	sort.Slice(all, func(i, j int) bool {
		if rotateAfter != "" {
			if ai, aj := all[i].id > rotateAfter, all[j].id > rotateAfter; ai != aj {
				return ai
			}
		}
		return all[i].id < all[j].id
	})
	var picked []*orderedSub
	u := 0
	for _, t := range all[:min(n, len(all))] {
		if t.sub != nil {
			picked = append(picked, t.sub)
		} else {
			u++
		}
	}
	return picked, u
}

// claimUpTo claims up to n more deliveries of an ordered subscription,
// within its throttle budget; one that comes back short is done for this
// claim.
func (o *orderedClaim) claimUpTo(ctx context.Context, tx pgx.Tx, sub *orderedSub, n int) (int, error) {
	want := n
	if sub.cap >= 0 {
		want = min(want, sub.cap)
	}
	got := 0
	if want > 0 && sub.next < len(sub.keys) {
		var err error
		if got, err = o.claimSub(ctx, tx, sub, want); err != nil {
			return 0, err
		}
	}
	sub.got += got
	if got < n {
		sub.done = true
	}
	return got, nil
}

// take returns the deliveries claimed since the last take.
func (o *orderedClaim) take() []*store.ClaimedDelivery {
	out := o.claimed
	o.claimed = nil
	return out
}

// keysCompleteSQL frees the keys held by applied outcomes ($1 ids, $2
// owners, $3 states) and raises the last delivered version or position
// (seq, created_at, id) of delivered ones (never lowers them). A key is
// held by a delivery only while it is in flight under that owner, which is
// exactly when its outcome applies.
const keysCompleteSQL = `
UPDATE delivery_keys k SET holder = NULL, holder_owner = NULL, holder_until = NULL,
	last_version = CASE WHEN o.state = 'delivered' AND d.event_version IS NOT NULL
		THEN greatest(k.last_version, d.event_version) ELSE k.last_version END,
	last_pos_seq = CASE WHEN ` + keyPosNewerSQL + ` THEN d.seq ELSE k.last_pos_seq END,
	last_pos_at = CASE WHEN ` + keyPosNewerSQL + ` THEN d.created_at ELSE k.last_pos_at END,
	last_pos_id = CASE WHEN ` + keyPosNewerSQL + ` THEN d.id ELSE k.last_pos_id END
FROM unnest($1::text[], $2::text[], $3::text[]) AS o(id, owner, state)
JOIN deliveries d ON d.id = o.id
WHERE d.event_key <> '' AND k.subscription_id = d.subscription_id AND k.event_key = d.event_key
  AND k.holder = o.id AND k.holder_owner = o.owner`

// keyPosNewerSQL: outcome o delivered d, a versionless delivery after the
// key's last delivered position.
const keyPosNewerSQL = `(o.state = 'delivered' AND d.event_version IS NULL
		AND (k.last_pos_id IS NULL OR (d.seq, d.created_at, d.id) > (k.last_pos_seq, k.last_pos_at, k.last_pos_id)))`

// keysReleaseSQL frees the keys held by deliveries ($1) released by owner ($2).
const keysReleaseSQL = `UPDATE delivery_keys SET holder = NULL, holder_owner = NULL, holder_until = NULL
	WHERE holder = ANY($1) AND holder_owner = $2`

// addClaimed appends claimed deliveries and notes their subscriptions.
func addClaimed(out, claimed []*store.ClaimedDelivery, subIDs map[string]bool) []*store.ClaimedDelivery {
	for _, c := range claimed {
		subIDs[c.Delivery.SubscriptionID] = true
	}
	return append(out, claimed...)
}

// orderedNextDue is DeliveryNextDue for ordered subscriptions (throttled
// ones are throttle.go's): a due delivery whose key is blocked is not a
// reason to wake — the completion that frees the key wakes the engine — so
// it counts keyless deliveries, keyed ones that mature after now, and the
// end of running key intervals.
func (s *Store) orderedNextDue(ctx context.Context, q querier, tier int, now time.Time) (*time.Time, error) {
	exist, err := s.orderedExist(ctx, q)
	if err != nil || !exist {
		return nil, err
	}
	var next *time.Time
	err = q.QueryRow(ctx, `SELECT min(t) FROM (
			SELECT least(
				-- A keyless delivery among the first due ones.
				(SELECT min(w.next_attempt_at) FROM (SELECT d.next_attempt_at, d.event_key FROM deliveries d
					WHERE d.tier = $1 AND d.subscription_id = s.id AND d.state = 'pending'
					ORDER BY d.next_attempt_at LIMIT $3) w WHERE w.event_key = ''),
				-- The first delivery maturing after now.
				(SELECT d.next_attempt_at FROM deliveries d
					WHERE d.tier = $1 AND d.subscription_id = s.id AND d.state = 'pending' AND d.next_attempt_at > $2
					ORDER BY d.next_attempt_at LIMIT 1)) AS t
			FROM subscriptions s WHERE s.state = 'enabled' AND s.deleted_at IS NULL
				AND `+orderedPredicate+` AND NOT `+throttledPredicate+`
			UNION ALL
			SELECT min(k.last_sent_at + s.key_interval_ms * interval '1 millisecond') FROM delivery_keys k
				JOIN subscriptions s ON s.id = k.subscription_id
			WHERE s.key_interval_ms > 0 AND k.holder IS NULL
				AND k.last_sent_at + s.key_interval_ms * interval '1 millisecond' > $2
				AND s.state = 'enabled' AND s.deleted_at IS NULL AND `+orderedPredicate+`
				AND NOT `+throttledPredicate+`) x`, tier, ms(now), store.OrderedNextDueWindow).Scan(&next)
	return utcPtr(next), err
}

func msDuration(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// prefixedColumns qualifies a comma-separated column list with alias.
func prefixedColumns(alias, columns string) string {
	parts := strings.Split(columns, ",")
	for i, p := range parts {
		parts[i] = alias + "." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// createKeyRowsQuery is the statement creating the missing delivery_keys
// rows of the discovered keys (createKeyRows), run first in the round trip
// of the first key locks.
//
// createKeyRows: it creates the missing delivery_keys rows of the keys with due
// work, in one statement, in (subscription, key) order, before the claim
// takes any key lock. Rows that exist are filtered out by the snapshot
// (NOT EXISTS) rather than by ON CONFLICT: the conflict check of an insert
// waits for a transaction updating the existing row (a completion freeing
// the key), and such a wait from a claim holding key locks could close a
// deadlock. Done first and in one sorted statement, the only waits left
// are on other claims inserting the same new keys, in the same order.
func createKeyRowsQuery(subs []*orderedSub) (string, []any) {
	var subIDs, keys []string
	for _, sub := range subs {
		for _, k := range sub.keys {
			if k != "" {
				subIDs, keys = append(subIDs, sub.id), append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return "", nil
	}
	return `INSERT INTO delivery_keys (subscription_id, event_key)
		SELECT x.sub, x.key FROM unnest($1::text[], $2::text[]) AS x(sub, key)
		WHERE NOT EXISTS (SELECT 1 FROM delivery_keys k WHERE k.subscription_id = x.sub AND k.event_key = x.key)
		ORDER BY x.sub, x.key
		ON CONFLICT (subscription_id, event_key) DO NOTHING`, []any{subIDs, keys}
}

// stillPending is the predicate "alias.state = 'pending'" for the ordered
// claim's statements that find their rows by id: "IN" confines them to the
// active partition of deliveries at plan time and gives the primary key
// (id, state) both its columns, and the second spelling keeps the partial
// pending index (its predicate no longer implied) out of the choice. The
// unordered claim, where a planner on stale statistics walked that index
// for the ids (issue 28), finds its rows by tuple id instead (claim.go,
// ADR 0030); these statements were not measured.
func stillPending(alias string) string {
	return alias + ".state IN ('pending', 'in_flight') AND " + alias + ".state IS NOT DISTINCT FROM 'pending'"
}
