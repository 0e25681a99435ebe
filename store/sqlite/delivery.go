package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

const deliveryColumns = `id, event_id, subscription_id, state, tier, attempt_count, next_attempt_at,
	event_key, event_version, last_status, last_error, last_message, created_at, updated_at, event_tenant`

// prefixed returns deliveryColumns qualified with a table alias.
func prefixed(alias, columns string) string {
	parts := strings.Split(columns, ",")
	for i, p := range parts {
		parts[i] = alias + "." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

func deliveryDest(d *herald.Delivery, next, version *sql.NullInt64, state, lastError *string, createdAt, updatedAt *int64) []any {
	return []any{&d.ID, &d.EventID, &d.SubscriptionID, state, &d.Tier, &d.AttemptCount, next,
		&d.EventKey, version, &d.LastStatus, lastError, &d.LastMessage, createdAt, updatedAt, &d.EventTenant}
}

// deliveryScan collects the SQL-typed columns of one delivery row.
type deliveryScan struct {
	d                    herald.Delivery
	next, version        sql.NullInt64
	state, lastError     string
	createdAt, updatedAt int64
}

func (s *deliveryScan) dest() []any {
	return deliveryDest(&s.d, &s.next, &s.version, &s.state, &s.lastError, &s.createdAt, &s.updatedAt)
}

func (s *deliveryScan) delivery() *herald.Delivery {
	d := s.d
	d.State = herald.DeliveryState(s.state)
	d.LastError = herald.ErrorClass(s.lastError)
	d.NextAttemptAt = fromNullMS(s.next)
	if s.version.Valid {
		v := s.version.Int64
		d.EventVersion = &v
	}
	d.CreatedAt, d.UpdatedAt = fromMS(s.createdAt), fromMS(s.updatedAt)
	return &d
}

func scanDeliveries(rows *sql.Rows) ([]*herald.Delivery, error) {
	defer rows.Close()
	out := []*herald.Delivery{}
	for rows.Next() {
		var ds deliveryScan
		if err := rows.Scan(ds.dest()...); err != nil {
			return nil, err
		}
		out = append(out, ds.delivery())
	}
	return out, rows.Err()
}

func getDelivery(ctx context.Context, q queryer, id string) (*herald.Delivery, error) {
	var ds deliveryScan
	err := q.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE id = ?`, id).Scan(ds.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, herald.NotFoundf("delivery %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	return ds.delivery(), nil
}

// DeliveryGet returns a delivery with its attempts, oldest first.
func (s *Store) DeliveryGet(ctx context.Context, id string) (*store.DeliveryGetResult, error) {
	res := &store.DeliveryGetResult{}
	err := s.readTx(ctx, "delivery get", func(tx queryer) error {
		var err error
		if res.Delivery, err = getDelivery(ctx, tx, id); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT n, at, duration_ms, status, error, error_message,
			response_excerpt, tier, request_headers, response_headers FROM attempts WHERE delivery_id = ? ORDER BY id`, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		res.Attempts = []herald.Attempt{}
		for rows.Next() {
			var (
				a             herald.Attempt
				at            int64
				class         string
				sent, replied *string
			)
			if err := rows.Scan(&a.N, &at, &a.DurationMS, &a.Status, &class, &a.ErrorMessage,
				&a.ResponseExcerpt, &a.Tier, &sent, &replied); err != nil {
				return err
			}
			a.At, a.Error = fromMS(at), herald.ErrorClass(class)
			if a.RequestHeaders, err = store.DecodeAttemptHeaders(sent); err != nil {
				return err
			}
			if a.ResponseHeaders, err = store.DecodeAttemptHeaders(replied); err != nil {
				return err
			}
			res.Attempts = append(res.Attempts, a)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// DeliveryList pages through deliveries newest first (id descending).
func (s *Store) DeliveryList(ctx context.Context, params *store.DeliveryListParams) (*store.DeliveryListResult, error) {
	limit := store.PageLimit(params.Limit)
	var (
		where []string
		args  []any
	)
	if params.SubscriptionID != "" {
		where, args = append(where, "subscription_id = ?"), append(args, params.SubscriptionID)
	}
	if params.EventID != "" {
		where, args = append(where, "event_id = ?"), append(args, params.EventID)
	}
	if params.Tenant != "" {
		where = append(where, "subscription_id IN (SELECT id FROM subscriptions WHERE tenant = ? AND tenant <> '')")
		args = append(args, params.Tenant)
	}
	if params.State != "" {
		where, args = append(where, "state = ?"), append(args, string(params.State))
	}
	if params.Before != "" {
		where, args = append(where, "id < ?"), append(args, params.Before)
	}
	if !params.Since.IsZero() {
		where, args = append(where, "created_at >= ?"), append(args, ms(params.Since))
	}
	if !params.Until.IsZero() {
		where, args = append(where, "created_at < ?"), append(args, ms(params.Until))
	}
	query := `SELECT ` + deliveryColumns + ` FROM deliveries`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit+1)

	res := &store.DeliveryListResult{}
	err := s.readTx(ctx, "delivery list", func(tx queryer) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		res.Deliveries, err = scanDeliveries(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(res.Deliveries) > limit {
		res.Deliveries, res.More = res.Deliveries[:limit], true
	}
	return res, nil
}

// DeliveryNextDue returns the earliest next_attempt_at of the tier's pending
// deliveries whose subscription is enabled: one indexed probe per enabled
// subscription, so a disabled subscription's backlog costs nothing.
//
// The engine asks after every claim that came back short, so under load
// this runs hundreds of times a second: the throttled and ordered parts
// (separate statements) run only when such subscriptions exist, which the
// first statement's versions tell from a cache.
func (s *Store) DeliveryNextDue(ctx context.Context, params *store.DeliveryNextDueParams) (*time.Time, error) {
	var (
		next    sql.NullInt64
		version store.SubscriptionsVersions
	)
	// Throttled subscriptions are left to throttleNextDue (throttle.go).
	err := s.rdb.QueryRowContext(ctx, `SELECT (SELECT MIN((SELECT d.next_attempt_at FROM deliveries d
			WHERE d.state = 'pending' AND d.tier = ? AND d.subscription_id = s.id
			ORDER BY d.next_attempt_at LIMIT 1))
		FROM subscriptions s WHERE s.state = 'enabled' AND s.deleted_at IS NULL
			AND NOT `+throttledPredicate+` AND NOT `+orderedPredicate+`),
		(SELECT value FROM meta WHERE key = 'subscriptions_version'),
		(SELECT value FROM meta WHERE key = 'pauses_version')`, params.Tier).Scan(&next, &version.Subscriptions, &version.Pauses)
	if err != nil {
		return nil, fmt.Errorf("sqlite: delivery next due: %w", unavailable(err))
	}
	kinds, err := s.subscriptionKinds(ctx, version)
	if err != nil {
		return nil, fmt.Errorf("sqlite: delivery next due: %w", unavailable(err))
	}
	if kinds.throttled {
		throttled, err := throttleNextDue(ctx, s.rdb, params.Tier, ms(params.Now))
		if err != nil {
			return nil, fmt.Errorf("sqlite: delivery next due: %w", unavailable(err))
		}
		if throttled != nil && (!next.Valid || *throttled < next.Int64) {
			next = sql.NullInt64{Int64: *throttled, Valid: true}
		}
	}
	if kinds.ordered {
		// Ordered subscriptions are left to orderedNextDue (ordering.go).
		ordered, err := orderedNextDue(ctx, s.rdb, params.Tier, ms(params.Now))
		if err != nil {
			return nil, fmt.Errorf("sqlite: delivery next due: %w", unavailable(err))
		}
		if ordered.Valid && (!next.Valid || ordered.Int64 < next.Int64) {
			next = ordered
		}
	}
	return fromNullMS(next), nil
}

// subscriptionKinds says whether throttled and ordered subscriptions
// exist (deleted ones included: they may still hold work until their
// deliveries are cancelled, and leaving them in only costs a query).
type subscriptionKinds struct {
	version            store.SubscriptionsVersions
	valid              bool
	throttled, ordered bool
}

// covers reports whether kinds read at k.version answer for v.
func (k subscriptionKinds) covers(v store.SubscriptionsVersions) bool {
	return k.valid && k.version.Subscriptions >= v.Subscriptions && k.version.Pauses >= v.Pauses
}

// subscriptionKinds returns the kinds as of version or later: every
// subscription change (create, update, delete, disable) bumps the
// subscriptions version and every pause (which makes a subscription
// throttled) the pauses version, so a cache entry for both is exact.
func (s *Store) subscriptionKinds(ctx context.Context, version store.SubscriptionsVersions) (subscriptionKinds, error) {
	s.kindsMu.Lock()
	k := s.kinds
	s.kindsMu.Unlock()
	if k.covers(version) {
		return k, nil
	}
	k = subscriptionKinds{valid: true}
	err := s.rdb.QueryRowContext(ctx, `SELECT (SELECT value FROM meta WHERE key = 'subscriptions_version'),
		(SELECT value FROM meta WHERE key = 'pauses_version'),
		EXISTS (SELECT 1 FROM subscriptions s WHERE `+throttledPredicate+`),
		EXISTS (SELECT 1 FROM subscriptions s WHERE `+orderedPredicate+`)`).Scan(
		&k.version.Subscriptions, &k.version.Pauses, &k.throttled, &k.ordered)
	if err != nil {
		return subscriptionKinds{}, err
	}
	s.kindsMu.Lock()
	if !s.kinds.covers(k.version) {
		s.kinds = k
	}
	s.kindsMu.Unlock()
	return k, nil
}

// DeliveryRelease gives back in-flight deliveries held by LeaseOwner.
func (s *Store) DeliveryRelease(ctx context.Context, params *store.DeliveryReleaseParams) (int, error) {
	if len(params.IDs) == 0 {
		return 0, nil
	}
	var n int64
	now := ms(params.Now)
	err := s.queueTx(ctx, "delivery release", func(tx queryer) error {
		if err := keysRelease(ctx, tx, params.IDs, params.LeaseOwner); err != nil {
			return err
		}
		args := append([]any{now, now, params.LeaseOwner}, anySlice(params.IDs)...)
		res, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'pending', next_attempt_at = ?,
			lease_owner = NULL, lease_until = NULL, updated_at = ?
			WHERE state = 'in_flight' AND lease_owner = ? AND id IN (`+placeholders(len(params.IDs))+`)`, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// DeliveryRescue makes in-flight deliveries whose lease expired before Now
// pending again in their tier.
func (s *Store) DeliveryRescue(ctx context.Context, params *store.DeliveryRescueParams) (int, error) {
	now := ms(params.Now)
	return s.rescue(ctx, "delivery rescue", now, now, "")
}

// DeliveryRescueDead does nothing: one process owns the database, and
// NodeLivenessHold rescued what dead ones left (store/liveness.go).
func (s *Store) DeliveryRescueDead(context.Context, *store.DeliveryRescueDeadParams) (int, error) {
	return 0, nil
}

// NodeLivenessHold rescues every in-flight delivery: with the data
// directory locked, their owners are dead processes (store/liveness.go).
// Without the lock (Config.NoLock) only NodeID's own are taken.
func (s *Store) NodeLivenessHold(ctx context.Context, params *store.NodeLivenessHoldParams) (int, error) {
	owner := ""
	if !s.locked {
		if params.NodeID == "" {
			return 0, nil
		}
		owner = params.NodeID
	}
	return s.rescue(ctx, "node liveness hold", ms(params.Now), math.MaxInt64, owner)
}

// rescue makes pending, due at now, the in-flight deliveries whose lease
// ends before before (and that owner holds, if set), freeing the ordering
// keys they hold in the same transaction.
func (s *Store) rescue(ctx context.Context, op string, now, before int64, owner string) (int, error) {
	var n int64
	err := s.queueTx(ctx, op, func(tx queryer) error {
		if err := keysRescue(ctx, tx, before, owner); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'pending', next_attempt_at = ?,
			lease_owner = NULL, lease_until = NULL, updated_at = ?
			WHERE state = 'in_flight' AND lease_until < ? AND (? = '' OR lease_owner = ?)`, now, now, before, owner, owner)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// DeliveryRetry puts one finished delivery back in tier 0, due at Now.
func (s *Store) DeliveryRetry(ctx context.Context, params *store.DeliveryRetryParams) (*herald.Delivery, error) {
	var out *herald.Delivery
	now := ms(params.Now)
	err := s.writeTx(ctx, "delivery retry", func(tx queryer) error {
		d, err := getDelivery(ctx, tx, params.ID)
		if err != nil {
			return err
		}
		if !d.State.Finished() {
			return herald.Conflictf("delivery %s is %s, not finished", d.ID, d.State)
		}
		var deleted sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT deleted_at FROM subscriptions WHERE id = ?`, d.SubscriptionID).Scan(&deleted); err != nil {
			return err
		}
		if deleted.Valid {
			return herald.Conflictf("delivery %s belongs to deleted subscription %s", d.ID, d.SubscriptionID)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'pending', tier = 0, next_attempt_at = ?,
			lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE id = ?`, now, now, d.ID); err != nil {
			return err
		}
		out, err = getDelivery(ctx, tx, d.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeadLetterRedrive puts a subscription's dead deliveries that died in
// [Since, Until) back in tier 0. A deleted (or unknown) subscription has
// nothing to redrive: its deliveries could never be claimed.
func (s *Store) DeadLetterRedrive(ctx context.Context, params *store.DeadLetterRedriveParams) (int, error) {
	if params.SubscriptionID == "" {
		return 0, errors.New("sqlite: dead letter redrive: SubscriptionID is required")
	}
	where, args := deadLetterWhere(params)
	limit := ""
	if params.Limit > 0 {
		// The ones that died first go first, so successive calls walk the
		// backlog in order (deliveries_dead index).
		limit = ` ORDER BY updated_at, id LIMIT ` + strconv.Itoa(params.Limit)
	}
	now := ms(params.Now)
	var n int64
	err := s.writeTx(ctx, "dead letter redrive", func(tx queryer) error {
		res, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'pending', tier = 0, next_attempt_at = ?,
			lease_owner = NULL, lease_until = NULL, updated_at = ?
			WHERE id IN (SELECT id FROM deliveries WHERE `+where+limit+`)`,
			append([]any{now, now}, args...)...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// deadLetterWhere is the condition DeadLetterRedrive and DeadLetterCount
// share: the subscription's dead letters in the window that can be
// redriven (its subscription is not deleted).
func deadLetterWhere(params *store.DeadLetterRedriveParams) (string, []any) {
	since, until := int64(math.MinInt64), int64(math.MaxInt64)
	if !params.Since.IsZero() {
		since = ms(params.Since)
	}
	if !params.Until.IsZero() {
		until = ms(params.Until)
	}
	where := `subscription_id = ? AND state = 'dead' AND updated_at >= ? AND updated_at < ?
		AND EXISTS (SELECT 1 FROM subscriptions s WHERE s.id = deliveries.subscription_id AND s.deleted_at IS NULL)`
	args := []any{params.SubscriptionID, since, until}
	if params.Error != "" {
		where += ` AND last_error = ?`
		args = append(args, string(params.Error))
	}
	return where, args
}
