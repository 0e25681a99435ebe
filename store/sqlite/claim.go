package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/seal"
	"github.com/heraldhq/herald/store"
)

// claimCandidate is a subscription with due work in the tier being claimed.
type claimCandidate struct {
	id     string
	oldest int64 // earliest due next_attempt_at
	lease  int64 // lease granted to this subscription's deliveries
	// ordering and keyIntervalMS select the per-key path (ordering.go)
	// for fifo and latest subscriptions.
	ordering      herald.Ordering
	keyIntervalMS int64
	// throttled subscriptions may take at most cap more deliveries in
	// this claim (see throttle.go); set by throttleClaimCaps.
	throttled bool
	cap       int
	got       int // claimed so far in this claim
}

// DeliveryClaim leases up to Limit due pending deliveries of one tier, fairly
// across subscriptions, in one write transaction.
//
// Cost is O(enabled subscriptions + Limit), never O(backlog):
//
//  1. One indexed probe per enabled subscription (deliveries_pending is
//     (tier, subscription_id, next_attempt_at, id) over pending rows) finds
//     the subscriptions with due work and their oldest due time.
//  2. Water-filling: the remaining budget is split evenly over the
//     subscriptions still in the running; the remainder of the division goes
//     to those that have fewest so far, then to those that have waited
//     longest. Each subscription's share is taken with one SELECT … ORDER
//     BY next_attempt_at, id LIMIT share — an index range scan of at most
//     share rows — and an UPDATE per picked row. A subscription that yields
//     less than its share is exhausted and drops out; what it left unused
//     is split again over the others. Each round either fills the budget or
//     drops a subscription, so there are at most k rounds and in practice
//     one or two.
//  3. One read of the claimed rows joined with their events, plus each
//     claimed subscription and its active secrets.
func (s *Store) DeliveryClaim(ctx context.Context, params *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	out := []*store.ClaimedDelivery{}
	if params.Limit <= 0 {
		return out, nil
	}
	now := ms(params.Now)
	err := s.queueTx(ctx, "delivery claim", func(tx queryer) error {
		// The claim holds the writer from here on: its requests start now,
		// however long it waited for the writer after its caller took Now.
		// Throttling counts and records starts at this time.
		start := ms(params.ClaimStart())
		cands, err := claimCandidates(ctx, tx, params)
		if err != nil || len(cands) == 0 {
			return err
		}
		if cands, err = throttleClaimCaps(ctx, tx, cands, start); err != nil || len(cands) == 0 {
			return err
		}
		// Select, then update by primary key: measured on SQLite 3.5x, the
		// single "UPDATE … WHERE id IN (SELECT … LIMIT n)" took ~1 ms per
		// subscription against ~50 µs for this pair.
		pick, err := tx.PrepareContext(ctx, `SELECT id FROM deliveries
			WHERE state = 'pending' AND tier = ? AND subscription_id = ? AND next_attempt_at <= ?
			ORDER BY next_attempt_at, id LIMIT ?`)
		if err != nil {
			return err
		}
		defer pick.Close()

		var ids []string
		leases := map[string]int64{} // subscription id -> lease
		var ordered *orderedClaim    // per-key state of this claim (ordering.go)
		left := params.Limit
		active := cands
		for left > 0 && len(active) > 0 {
			base, extra := left/len(active), left%len(active)
			var waiting, full []*claimCandidate // waiting: got no share this round
			for i, c := range active {
				share := base
				if i < extra {
					share++
				}
				if share == 0 {
					waiting = append(waiting, c)
					continue
				}
				if c.throttled {
					share = min(share, c.cap)
				}
				picked, err := pickDue(ctx, tx, pick, &ordered, params, c, share)
				if err != nil {
					return err
				}
				if c.throttled {
					if err := throttleRecord(ctx, tx, c.id, picked, start); err != nil {
						return err
					}
					c.cap -= len(picked)
				}
				if err := leaseIDs(ctx, tx, picked, params.LeaseOwner, c.lease, now); err != nil {
					return err
				}
				ids = append(ids, picked...)
				got := len(picked)
				c.got += got
				left -= got
				leases[c.id] = c.lease
				if got == share && (!c.throttled || c.cap > 0) {
					full = append(full, c)
				}
			}
			// Fewest so far first next round (those that got nothing this
			// round, then those that got no remainder), so the remainder of
			// an uneven split goes where it evens the counts out.
			// (Not sorted when the claim is full: with many subscriptions
			// and a small limit the first round fills it, and the sort of
			// every candidate cost ~9% of the claim at 1,000.)
			active = append(waiting, full...)
			if left > 0 {
				slices.SortStableFunc(active, func(a, b *claimCandidate) int { return cmp.Compare(a.got, b.got) })
			}
		}
		if len(ids) == 0 {
			return nil
		}
		out, err = loadClaimed(ctx, tx, s.keys, ids, leases, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// leaseIDs marks picked pending deliveries in_flight in one statement (one
// cgo call and one statement step instead of one per row).
func leaseIDs(ctx context.Context, tx queryer, ids []string, owner string, until, now int64) error {
	if len(ids) == 0 {
		return nil
	}
	in, idArgs := inList(anySlice(ids))
	args := append([]any{owner, until, now}, idArgs...)
	_, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'in_flight', lease_owner = ?,
		lease_until = ?, updated_at = ? WHERE id IN (`+in+`) AND state = 'pending'`, args...)
	return err
}

func pickIDs(ctx context.Context, pick *sql.Stmt, tier int, subID string, now int64, n int) ([]string, error) {
	rows, err := pick.QueryContext(ctx, tier, subID, now, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := make([]string, 0, n)
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// claimCandidates returns the enabled subscriptions with due work in the
// tier, longest-waiting first, with the lease each one's deliveries get.
func claimCandidates(ctx context.Context, tx queryer, params *store.DeliveryClaimParams) ([]*claimCandidate, error) {
	now := ms(params.Now)
	// MATERIALIZED: flattened, the subquery ran twice per subscription (once
	// for the filter, once for the column), and this probe is most of a
	// claim's cost when many subscriptions are enabled.
	rows, err := tx.QueryContext(ctx, `WITH c AS MATERIALIZED (
			SELECT s.id, s.timeout_ms, s.ordering, s.key_interval_ms, (SELECT d.next_attempt_at FROM deliveries d
				WHERE d.state = 'pending' AND d.tier = ? AND d.subscription_id = s.id AND d.next_attempt_at <= ?
				ORDER BY d.next_attempt_at LIMIT 1) AS oldest
			FROM subscriptions s WHERE s.state = 'enabled' AND s.deleted_at IS NULL)
		SELECT id, timeout_ms, ordering, key_interval_ms, oldest FROM c WHERE oldest IS NOT NULL`, params.Tier, now)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*claimCandidate
	for rows.Next() {
		var (
			c         claimCandidate
			timeoutMS int64
		)
		if err := rows.Scan(&c.id, &timeoutMS, &c.ordering, &c.keyIntervalMS, &c.oldest); err != nil {
			return nil, err
		}
		c.lease = ms(params.LeaseFor(&herald.Subscription{TimeoutMS: timeoutMS}))
		out = append(out, &c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Who gets the remainder of an uneven split (and, when more
	// subscriptions have work than Limit, who is served at all): with
	// RotateAfter, subscriptions after it in id order, wrapping around, so
	// successive small claims visit each in turn; otherwise the one that
	// has waited longest.
	rotate := params.RotateAfter
	sort.Slice(out, func(i, j int) bool {
		if rotate != "" {
			ai, aj := out[i].id > rotate, out[j].id > rotate
			if ai != aj {
				return ai
			}
			return out[i].id < out[j].id
		}
		if out[i].oldest != out[j].oldest {
			return out[i].oldest < out[j].oldest
		}
		return out[i].id < out[j].id
	})
	return out, nil
}

// loadClaimed reads everything a worker needs for the claimed deliveries, in
// next_attempt_at order.
func loadClaimed(ctx context.Context, tx queryer, keys *seal.Ring, ids []string, leases map[string]int64, now int64) ([]*store.ClaimedDelivery, error) {
	in, idArgs := inList(anySlice(ids))
	rows, err := tx.QueryContext(ctx, `SELECT `+prefixed("d", deliveryColumns)+`, `+prefixed("e", eventColumns)+`
		FROM deliveries d JOIN events e ON e.id = d.event_id AND e.tenant = d.event_tenant
		WHERE d.id IN (`+in+`)
		ORDER BY d.next_attempt_at, d.id`, idArgs...)
	if err != nil {
		return nil, err
	}
	var out []*store.ClaimedDelivery
	subs := map[string]*herald.Subscription{}
	for rows.Next() {
		var (
			ds        deliveryScan
			version   sql.NullInt64
			data      []byte
			createdAt int64
			ev        herald.Event
		)
		dest := append(ds.dest(), &ev.ID, &ev.Type, &ev.Key, &version, &data, &createdAt, &ev.Tenant)
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return nil, err
		}
		if version.Valid {
			v := version.Int64
			ev.Version = &v
		}
		ev.Data, ev.CreatedAt = data, fromMS(createdAt)
		d := ds.delivery()
		subs[d.SubscriptionID] = nil
		out = append(out, &store.ClaimedDelivery{
			Delivery:   d,
			Event:      &ev,
			Attempt:    d.AttemptCount + 1,
			LeaseUntil: fromMS(leases[d.SubscriptionID]),
		})
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if len(out) != len(ids) {
		return nil, fmt.Errorf("claimed %d deliveries but loaded %d", len(ids), len(out))
	}
	// Subscriptions and their active secrets: one query each, however many
	// subscriptions the claim spans.
	subIDs := make([]string, 0, len(subs))
	for id := range subs {
		subIDs = append(subIDs, id)
	}
	subIn, subArgs := inList(anySlice(subIDs))
	subRows, err := tx.QueryContext(ctx, `SELECT `+subscriptionColumns+` FROM subscriptions
		WHERE id IN (`+subIn+`)`, subArgs...)
	if err != nil {
		return nil, err
	}
	loaded, err := scanSubscriptions(subRows)
	if err != nil {
		return nil, err
	}
	for _, sub := range loaded {
		subs[sub.ID] = sub
	}
	secRows, err := tx.QueryContext(ctx, `SELECT subscription_id, secret, created_at, expires_at
		FROM subscription_secrets
		WHERE subscription_id IN (`+subIn+`) AND (expires_at IS NULL OR expires_at > ?)
		ORDER BY subscription_id, created_at DESC, id DESC`, append(subArgs, now)...)
	if err != nil {
		return nil, err
	}
	secrets, err := scanSecretsBySubscription(secRows, keys)
	if err != nil {
		return nil, err
	}
	for _, c := range out {
		c.Subscription = subs[c.Delivery.SubscriptionID]
		c.Secrets = secrets[c.Delivery.SubscriptionID]
		if c.Secrets == nil {
			c.Secrets = []herald.Secret{}
		}
	}
	return out, nil
}
