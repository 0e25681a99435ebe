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
// to it) before it reads the key's deliveries in a later statement, so under
// READ COMMITTED it sees everything committed by the previous holder of the
// lock. The holder column (set in the claim transaction, cleared by the
// transaction that completes, releases or rescues the delivery) keeps the
// key taken while its delivery is in flight. Key rows are created (INSERT …
// ON CONFLICT DO NOTHING) the
// first time a key has due work (createKeyRows).
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

// orderedCache remembers whether ordered subscriptions exist.
type orderedCache struct {
	checkedAt time.Time // wall clock; zero = unknown
	exists    bool
}

func (s *Store) orderedInvalidate() {
	s.orderedMu.Lock()
	s.ordered = orderedCache{}
	s.orderedMu.Unlock()
}

// orderedExist reports whether any fifo or latest subscription exists,
// asking the database at most once per orderedCacheTTL.
func (s *Store) orderedExist(ctx context.Context, tx querier) (bool, error) {
	s.orderedMu.Lock()
	c := s.ordered
	s.orderedMu.Unlock()
	if !c.checkedAt.IsZero() && time.Since(c.checkedAt) < orderedCacheTTL {
		return c.exists, nil
	}
	started := time.Now()
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM subscriptions s
		WHERE `+orderedPredicate+` AND s.deleted_at IS NULL)`).Scan(&exists); err != nil {
		return false, err
	}
	s.orderedMu.Lock()
	if s.ordered.checkedAt.IsZero() || s.ordered.checkedAt.Before(started) {
		s.ordered = orderedCache{checkedAt: started, exists: exists}
	}
	s.orderedMu.Unlock()
	return exists, nil
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
	// cap is the throttle budget left in this claim (-1: not throttled);
	// set by throttleOrderedCaps, spent by throttleOrderedClaimed
	// (throttle.go).
	cap int
}

// orderedClaim is the ordered part of one DeliveryClaim.
type orderedClaim struct {
	params *store.DeliveryClaimParams
	now    time.Time
	subs   []*orderedSub
	ids    []string
	leases map[string]time.Time
}

// newOrderedClaim finds the ordered subscriptions with due work in the
// tier and their keys, or returns nil when there are none.
func (s *Store) newOrderedClaim(ctx context.Context, tx pgx.Tx, params *store.DeliveryClaimParams) (*orderedClaim, error) {
	exist, err := s.orderedExist(ctx, tx)
	if err != nil || !exist {
		return nil, err
	}
	now := ms(params.Now)
	rows, err := tx.Query(ctx, `SELECT s.id, s.ordering, s.key_interval_ms, s.timeout_ms,
			ARRAY(SELECT d.event_key FROM deliveries d
				WHERE d.tier = $1 AND d.subscription_id = s.id AND d.state = 'pending' AND d.next_attempt_at <= $2
				GROUP BY d.event_key ORDER BY min(d.next_attempt_at), d.event_key)
		FROM subscriptions s
		WHERE s.state = 'enabled' AND s.deleted_at IS NULL AND `+orderedPredicate+`
		ORDER BY s.id`, params.Tier, now)
	if err != nil {
		return nil, err
	}
	o := &orderedClaim{params: params, now: now, leases: map[string]time.Time{}}
	for rows.Next() {
		var (
			sub                 orderedSub
			ordering            string
			intervalMS, timeout int64
		)
		if err := rows.Scan(&sub.id, &ordering, &intervalMS, &timeout, &sub.keys); err != nil {
			rows.Close()
			return nil, err
		}
		if len(sub.keys) == 0 {
			continue
		}
		sub.ordering = herald.Ordering(ordering)
		sub.interval = msDuration(intervalMS)
		subTimeout := (&herald.Subscription{TimeoutMS: timeout}).Timeout()
		lease := now.Add(subTimeout + params.LeaseMargin)
		if params.LeaseUntil.After(lease) {
			lease = ms(params.LeaseUntil)
		}
		sub.lease = lease
		o.subs = append(o.subs, &sub)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(o.subs) == 0 {
		return nil, nil
	}
	// Throttled ordered subscriptions claim no more than their budget.
	if err := throttleOrderedCaps(ctx, tx, o.subs, params.Now); err != nil {
		return nil, err
	}
	if err := createKeyRows(ctx, tx, o.subs); err != nil {
		return nil, err
	}
	// Round-robin like the unordered claim: subscriptions after
	// RotateAfter first.
	if r := params.RotateAfter; r != "" {
		sort.SliceStable(o.subs, func(i, j int) bool { return o.subs[i].id > r && o.subs[j].id <= r })
	}
	return o, nil
}

// claim takes up to budget more deliveries, spread over the ordered
// subscriptions (each at most share, when share > 0).
func (o *orderedClaim) claim(ctx context.Context, tx pgx.Tx, budget, share int) error {
	for budget > 0 {
		progress := false
		active := 0
		for _, sub := range o.subs {
			if sub.next < len(sub.keys) {
				active++
			}
		}
		if active == 0 {
			return nil
		}
		per := max(1, (budget+active-1)/active)
		if share > 0 {
			per = min(per, share)
		}
		for _, sub := range o.subs {
			if budget <= 0 {
				break
			}
			if sub.next >= len(sub.keys) || (share > 0 && sub.got >= share) || sub.cap == 0 {
				continue
			}
			want := min(per, budget)
			if share > 0 {
				want = min(want, share-sub.got)
			}
			if sub.cap > 0 {
				want = min(want, sub.cap)
			}
			n, err := o.claimSub(ctx, tx, sub, want)
			if err != nil {
				return err
			}
			sub.got += n
			budget -= n
			if n > 0 {
				progress = true
			}
		}
		if !progress {
			return nil
		}
	}
	return nil
}

// claimSub claims up to want deliveries of one subscription: keyless due
// ones directly, and for its keys (oldest due first, a chunk at a time)
// what PlanKey allows.
func (o *orderedClaim) claimSub(ctx context.Context, tx pgx.Tx, sub *orderedSub, want int) (int, error) {
	got := 0
	for got < want && sub.next < len(sub.keys) {
		if sub.keys[sub.next] == "" {
			need := want - got
			ids, err := o.claimKeyless(ctx, tx, sub, need)
			if err != nil {
				return got, err
			}
			got += len(ids)
			if len(ids) < need {
				sub.next++ // keyless exhausted
			}
			continue
		}
		end := sub.next
		// Keys are decided in chunks a little larger than what is still
		// wanted (some keys are blocked), up to orderedKeyChunk.
		chunkLen := min(max(2*(want-got), 16), orderedKeyChunk)
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

// claimKeyless leases keyless due deliveries (unordered in every mode).
func (o *orderedClaim) claimKeyless(ctx context.Context, tx pgx.Tx, sub *orderedSub, n int) ([]string, error) {
	rows, err := tx.Query(ctx, `UPDATE deliveries SET state = 'in_flight', lease_owner = $4, lease_until = $5, updated_at = $3
		WHERE id = ANY (ARRAY(SELECT d.id FROM deliveries d
			WHERE d.tier = $1 AND d.subscription_id = $2 AND d.state = 'pending' AND d.next_attempt_at <= $3
			  AND d.event_key = ''
			ORDER BY d.next_attempt_at, d.id LIMIT $6 FOR UPDATE SKIP LOCKED)) AND state = 'pending'
		RETURNING id`, o.params.Tier, sub.id, o.now, o.params.LeaseOwner, sub.lease, n)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	return ids, o.add(ctx, tx, sub, ids)
}

// add records leased deliveries (and spends the throttle budget).
func (o *orderedClaim) add(ctx context.Context, tx pgx.Tx, sub *orderedSub, ids []string) error {
	o.ids = append(o.ids, ids...)
	if len(ids) > 0 {
		o.leases[sub.id] = sub.lease
	}
	return throttleOrderedClaimed(ctx, tx, sub, ids, o.now)
}

// claimKeys decides a chunk of keys (sorted for locking), claiming at most
// n deliveries; it returns how many it claimed and how many keys of the
// chunk it decided (a prefix, in chunk order).
func (o *orderedClaim) claimKeys(ctx context.Context, tx pgx.Tx, sub *orderedSub, chunk []string, n int) (int, int, error) {
	sorted := append([]string(nil), chunk...)
	sort.Strings(sorted)
	// Lock what no other claim holds; the rest is another node's to decide.
	rows, err := tx.Query(ctx, `SELECT event_key, holder, last_version, last_pos_at, last_pos_id, last_sent_at
		FROM delivery_keys WHERE subscription_id = $1 AND event_key = ANY($2)
		ORDER BY event_key FOR UPDATE SKIP LOCKED`, sub.id, sorted)
	if err != nil {
		return 0, 0, err
	}
	states := map[string]*store.KeyState{}
	for rows.Next() {
		var (
			key    string
			holder *string
			st     store.KeyState
			posAt  *time.Time
			posID  *string
		)
		if err := rows.Scan(&key, &holder, &st.LastVersion, &posAt, &posID, &st.LastSentAt); err != nil {
			rows.Close()
			return 0, 0, err
		}
		st.Held = holder != nil
		if posAt != nil {
			st.LastPosAt = posAt.UTC()
		}
		if posID != nil {
			st.LastPosID = *posID
		}
		states[key] = &st
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	var locked []string
	for k, st := range states {
		if !st.Held { // a held key has nothing to claim; skip/supersede waits for its turn
			locked = append(locked, k)
		}
	}
	// A statement after the locks: its snapshot has every commit of the
	// previous lock holders.
	byKey, err := readKeyDeliveries(ctx, tx, sub.id, locked)
	if err != nil {
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
		if st == nil || st.Held {
			continue
		}
		plan := store.PlanKey(sub.ordering, sub.interval, st, byKey[k], o.now)
		skip = append(skip, plan.Skip...)
		supersede = append(supersede, plan.Supersede...)
		if plan.Claimable(o.params.Tier, o.now) {
			claim = append(claim, plan.Next)
		}
	}
	batch := &pgx.Batch{}
	if len(skip) > 0 {
		batch.Queue(finishUnsentSQL, skip, string(herald.DeliverySkipped), o.now)
	}
	if len(supersede) > 0 {
		batch.Queue(finishUnsentSQL, supersede, string(herald.DeliverySuperseded), o.now)
	}
	if len(claim) > 0 {
		// Lease and take the key in one statement; only what was leased
		// (still pending) counts, whatever was decided.
		batch.Queue(`WITH leased AS (
				UPDATE deliveries SET state = 'in_flight', lease_owner = $2, lease_until = $3, updated_at = $4
				WHERE id = ANY($1) AND state = 'pending' AND subscription_id = $5
				RETURNING id, event_key)
			UPDATE delivery_keys k SET holder = l.id, holder_owner = $2, holder_until = $3, last_sent_at = $4
			FROM leased l WHERE k.subscription_id = $5 AND k.event_key = l.event_key
			RETURNING l.id`, claim, o.params.LeaseOwner, sub.lease, o.now, sub.id)
	}
	var leased []string
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
				leased, err = pgx.CollectRows(rows, pgx.RowTo[string])
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
	if err := o.add(ctx, tx, sub, leased); err != nil {
		return 0, 0, err
	}
	return len(leased), used, nil
}

// finishUnsentSQL moves pending deliveries to skipped or superseded.
const finishUnsentSQL = `UPDATE deliveries SET state = $2, next_attempt_at = NULL, updated_at = $3
	WHERE id = ANY($1) AND state = 'pending'`

// readKeyDeliveries reads the unfinished deliveries of keys, each key's in
// publish order (index deliveries_key_order_idx).
func readKeyDeliveries(ctx context.Context, q querier, subID string, keys []string) (map[string][]store.KeyDelivery, error) {
	out := map[string][]store.KeyDelivery{}
	if len(keys) == 0 {
		return out, nil
	}
	// One index range per key (LATERAL), whatever the planner thinks of
	// the table: a key's unfinished deliveries are a handful of rows, the
	// subscription's history may be millions.
	rows, err := q.Query(ctx, `SELECT k.key, d.id, d.state, d.tier, d.next_attempt_at, d.event_version, d.created_at
		FROM unnest($2::text[]) AS k(key)
		CROSS JOIN LATERAL (
			SELECT d.id, d.state, d.tier, d.next_attempt_at, d.event_version, d.created_at FROM deliveries d
			WHERE d.subscription_id = $1 AND d.event_key = k.key AND d.event_key <> ''
			  AND d.state IN ('pending', 'in_flight')
			ORDER BY d.created_at, d.id) d`, subID, keys)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key   string
			d     store.KeyDelivery
			state string
		)
		if err := rows.Scan(&key, &d.ID, &state, &d.Tier, &d.NextAttemptAt, &d.Version, &d.CreatedAt); err != nil {
			return nil, err
		}
		d.State, d.NextAttemptAt, d.CreatedAt = herald.DeliveryState(state), utcPtr(d.NextAttemptAt), d.CreatedAt.UTC()
		out[key] = append(out[key], d)
	}
	return out, rows.Err()
}

// readKeyState reads one key's state without locking (visibility).
func readKeyState(ctx context.Context, q querier, subID, key string) (*store.KeyState, error) {
	var (
		holder, posID *string
		posAt         *time.Time
		st            store.KeyState
	)
	err := q.QueryRow(ctx, `SELECT holder, last_version, last_pos_at, last_pos_id, last_sent_at
		FROM delivery_keys WHERE subscription_id = $1 AND event_key = $2`, subID, key).
		Scan(&holder, &st.LastVersion, &posAt, &posID, &st.LastSentAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return &store.KeyState{}, nil
	}
	if err != nil {
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

// loadOrderedClaimed reads the claimed deliveries with their events.
func loadOrderedClaimed(ctx context.Context, tx pgx.Tx, ids []string) ([]*store.ClaimedDelivery, error) {
	rows, err := tx.Query(ctx, `SELECT d.id, d.event_id, d.subscription_id, d.state, d.tier, d.attempt_count,
			d.next_attempt_at, d.event_key, d.event_version, d.last_status, d.last_error, d.last_message,
			d.created_at, d.updated_at, d.lease_until, e.id, e.type, e.key, e.version, e.data::text, e.created_at
		FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.ClaimedDelivery
	for rows.Next() {
		var (
			lease time.Time
			ev    herald.Event
			data  string
		)
		d, err := scanDelivery(rows, &lease, &ev.ID, &ev.Type, &ev.Key, &ev.Version, &data, &ev.CreatedAt)
		if err != nil {
			return nil, err
		}
		ev.Data, ev.CreatedAt = []byte(data), ev.CreatedAt.UTC()
		out = append(out, &store.ClaimedDelivery{Delivery: d, Event: &ev, Attempt: d.AttemptCount + 1, LeaseUntil: lease.UTC()})
	}
	return out, rows.Err()
}

// claimOrdered runs the ordered part of a claim: first up to a fair share
// for each ordered subscription (the unordered ones get the rest), the
// caller's unordered claim, then — through claimOrderedRest — whatever
// budget that left. It adds the claimed subscriptions to subIDs.
func (s *Store) claimOrdered(ctx context.Context, tx pgx.Tx, params *store.DeliveryClaimParams) (*orderedClaim, []*store.ClaimedDelivery, error) {
	o, err := s.newOrderedClaim(ctx, tx, params)
	if err != nil || o == nil {
		return nil, nil, err
	}
	// The unordered subscriptions count as one more in the split.
	share := max(1, (params.Limit+len(o.subs))/(len(o.subs)+1))
	if err := o.claim(ctx, tx, params.Limit, share); err != nil {
		return nil, nil, err
	}
	out, err := o.take(ctx, tx)
	return o, out, err
}

// rest claims up to budget more after the unordered claim.
func (o *orderedClaim) rest(ctx context.Context, tx pgx.Tx, budget int) ([]*store.ClaimedDelivery, error) {
	if o == nil || budget <= 0 {
		return nil, nil
	}
	if err := o.claim(ctx, tx, budget, 0); err != nil {
		return nil, err
	}
	return o.take(ctx, tx)
}

// take loads the deliveries claimed since the last take.
func (o *orderedClaim) take(ctx context.Context, tx pgx.Tx) ([]*store.ClaimedDelivery, error) {
	if len(o.ids) == 0 {
		return nil, nil
	}
	ids := o.ids
	o.ids = nil
	return loadOrderedClaimed(ctx, tx, ids)
}

// keysCompleteSQL frees the keys held by applied outcomes ($1 ids, $2
// owners, $3 states) and raises the last delivered version or position of
// delivered ones (never lowers them). A key is held by a delivery only
// while it is in flight under that owner, which is exactly when its
// outcome applies.
const keysCompleteSQL = `
UPDATE delivery_keys k SET holder = NULL, holder_owner = NULL, holder_until = NULL,
	last_version = CASE WHEN o.state = 'delivered' AND d.event_version IS NOT NULL
		THEN greatest(k.last_version, d.event_version) ELSE k.last_version END,
	last_pos_at = CASE WHEN o.state = 'delivered' AND d.event_version IS NULL
		AND (k.last_pos_at IS NULL OR (d.created_at, d.id) > (k.last_pos_at, k.last_pos_id))
		THEN d.created_at ELSE k.last_pos_at END,
	last_pos_id = CASE WHEN o.state = 'delivered' AND d.event_version IS NULL
		AND (k.last_pos_at IS NULL OR (d.created_at, d.id) > (k.last_pos_at, k.last_pos_id))
		THEN d.id ELSE k.last_pos_id END
FROM unnest($1::text[], $2::text[], $3::text[]) AS o(id, owner, state)
JOIN deliveries d ON d.id = o.id
WHERE d.event_key <> '' AND k.subscription_id = d.subscription_id AND k.event_key = d.event_key
  AND k.holder = o.id AND k.holder_owner = o.owner`

// keysReleaseSQL frees the keys held by deliveries ($1) released by owner ($2).
const keysReleaseSQL = `UPDATE delivery_keys SET holder = NULL, holder_owner = NULL, holder_until = NULL
	WHERE holder = ANY($1) AND holder_owner = $2`

// keysRescueSQL frees the keys whose holder's lease expired before $1 (the
// same lease as the delivery's, so exactly the rescued ones).
const keysRescueSQL = `UPDATE delivery_keys SET holder = NULL, holder_owner = NULL, holder_until = NULL
	WHERE holder IS NOT NULL AND holder_until < $1`

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
			SELECT (SELECT d.next_attempt_at FROM deliveries d
				WHERE d.tier = $1 AND d.subscription_id = s.id AND d.state = 'pending'
				  AND (d.event_key = '' OR d.next_attempt_at > $2)
				ORDER BY d.next_attempt_at LIMIT 1) AS t
			FROM subscriptions s WHERE s.state = 'enabled' AND s.deleted_at IS NULL
				AND `+orderedPredicate+` AND NOT `+throttledPredicate+`
			UNION ALL
			SELECT min(k.last_sent_at + s.key_interval_ms * interval '1 millisecond') FROM delivery_keys k
				JOIN subscriptions s ON s.id = k.subscription_id
			WHERE s.key_interval_ms > 0 AND k.holder IS NULL
				AND k.last_sent_at + s.key_interval_ms * interval '1 millisecond' > $2
				AND s.state = 'enabled' AND s.deleted_at IS NULL AND `+orderedPredicate+`
				AND NOT `+throttledPredicate+`) x`, tier, ms(now)).Scan(&next)
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

// createKeyRows creates the missing delivery_keys rows of the keys with due
// work, in one statement, in (subscription, key) order, before the claim
// takes any key lock. Rows that exist are filtered out by the snapshot
// (NOT EXISTS) rather than by ON CONFLICT: the conflict check of an insert
// waits for a transaction updating the existing row (a completion freeing
// the key), and such a wait from a claim holding key locks could close a
// deadlock. Done first and in one sorted statement, the only waits left
// are on other claims inserting the same new keys, in the same order.
func createKeyRows(ctx context.Context, tx pgx.Tx, subs []*orderedSub) error {
	var subIDs, keys []string
	for _, sub := range subs {
		for _, k := range sub.keys {
			if k != "" {
				subIDs, keys = append(subIDs, sub.id), append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO delivery_keys (subscription_id, event_key)
		SELECT x.sub, x.key FROM unnest($1::text[], $2::text[]) AS x(sub, key)
		WHERE NOT EXISTS (SELECT 1 FROM delivery_keys k WHERE k.subscription_id = x.sub AND k.event_key = x.key)
		ORDER BY x.sub, x.key
		ON CONFLICT (subscription_id, event_key) DO NOTHING`, subIDs, keys)
	return err
}
