package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/seal"
	"github.com/heraldhq/herald/store"
)

const subscriptionColumns = `id, url, method, event_types, filter, headers, ordering, key_interval_ms,
	rate_max, rate_per_seconds, max_in_flight, timeout_ms, description, metadata, state,
	disabled_reason, created_at, updated_at, tenant, all_tenants, destination, connection, auto_disable`

// subscriptionRow holds a subscription's columns in SQL form.
type subscriptionRow struct {
	eventTypes, headers string
	filter, metadata    sql.NullString
	rateMax, ratePer    sql.NullInt64
	destination, conn   sql.NullString
	autoDisable         sql.NullString
}

func subscriptionArgs(sub *herald.Subscription) ([]any, error) {
	eventTypes, err := json.Marshal(nonNil(sub.EventTypes))
	if err != nil {
		return nil, err
	}
	headers := sub.Headers
	if headers == nil {
		headers = map[string]string{}
	}
	headersJSON, err := json.Marshal(headers)
	if err != nil {
		return nil, err
	}
	var filter, metadata, rateMax, ratePer any
	if !sub.Filter.IsZero() {
		b, err := json.Marshal(sub.Filter)
		if err != nil {
			return nil, err
		}
		filter = string(b)
	}
	if len(sub.Metadata) > 0 {
		metadata = string(sub.Metadata)
	}
	if sub.RateLimit != nil {
		rateMax, ratePer = sub.RateLimit.Max, sub.RateLimit.PerSeconds
	}
	url, method := store.WebhookColumns(sub)
	return []any{
		url, method, string(eventTypes), filter, string(headersJSON), string(sub.Ordering),
		sub.KeyIntervalMS, rateMax, ratePer, sub.MaxInFlight, sub.TimeoutMS, sub.Description, metadata,
		string(sub.State), sub.DisabledReason,
	}, nil
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

type scanner interface{ Scan(dest ...any) error }

func scanSubscription(row scanner) (*herald.Subscription, error) {
	var (
		sub                  herald.Subscription
		r                    subscriptionRow
		ordering, state      string
		createdAt, updatedAt int64
	)
	if err := row.Scan(&sub.ID, &sub.URL, &sub.Method, &r.eventTypes, &r.filter, &r.headers, &ordering,
		&sub.KeyIntervalMS, &r.rateMax, &r.ratePer, &sub.MaxInFlight, &sub.TimeoutMS, &sub.Description,
		&r.metadata, &state, &sub.DisabledReason, &createdAt, &updatedAt, &sub.Tenant, &sub.AllTenants,
		&r.destination, &r.conn, &r.autoDisable); err != nil {
		return nil, err
	}
	var dest *string
	if r.destination.Valid {
		dest = &r.destination.String
	}
	if err := store.DestinationFill(&sub, dest); err != nil {
		return nil, err
	}
	sub.Ordering = herald.Ordering(ordering)
	sub.State = herald.SubscriptionState(state)
	sub.CreatedAt, sub.UpdatedAt = fromMS(createdAt), fromMS(updatedAt)
	if err := json.Unmarshal([]byte(r.eventTypes), &sub.EventTypes); err != nil {
		return nil, fmt.Errorf("subscription %s event_types: %w", sub.ID, err)
	}
	if err := json.Unmarshal([]byte(r.headers), &sub.Headers); err != nil {
		return nil, fmt.Errorf("subscription %s headers: %w", sub.ID, err)
	}
	if r.filter.Valid {
		sub.Filter = &herald.Filter{}
		if err := json.Unmarshal([]byte(r.filter.String), sub.Filter); err != nil {
			return nil, fmt.Errorf("subscription %s filter: %w", sub.ID, err)
		}
	}
	if r.metadata.Valid {
		sub.Metadata = json.RawMessage(r.metadata.String)
	}
	if r.rateMax.Valid {
		sub.RateLimit = &herald.RateLimit{Max: int(r.rateMax.Int64), PerSeconds: int(r.ratePer.Int64)}
	}
	if r.autoDisable.Valid {
		sub.AutoDisable = &herald.AutoDisable{}
		if err := json.Unmarshal([]byte(r.autoDisable.String), sub.AutoDisable); err != nil {
			return nil, fmt.Errorf("subscription %s auto_disable: %w", sub.ID, err)
		}
	}
	return &sub, nil
}

// bumpSubscriptionsVersion moves the counter the fan-out cache watches.
func bumpSubscriptionsVersion(ctx context.Context, tx queryer) error {
	_, err := tx.ExecContext(ctx, `UPDATE meta SET value = value + 1 WHERE key = 'subscriptions_version'`)
	return err
}

// bumpPausesVersion moves the pauses counter (store.SubscriptionsVersions).
func bumpPausesVersion(ctx context.Context, tx queryer) error {
	_, err := tx.ExecContext(ctx, `UPDATE meta SET value = value + 1 WHERE key = 'pauses_version'`)
	return err
}

// versionsSQL reads both counters in one statement.
const versionsSQL = `SELECT (SELECT value FROM meta WHERE key = 'subscriptions_version'),
	(SELECT value FROM meta WHERE key = 'pauses_version')`

func getSubscription(ctx context.Context, q queryer, id string) (*herald.Subscription, error) {
	sub, err := scanSubscription(q.QueryRowContext(ctx,
		`SELECT `+subscriptionColumns+` FROM subscriptions WHERE id = ? AND deleted_at IS NULL`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, herald.NotFoundf("subscription %s not found", id)
	}
	return sub, err
}

// SubscriptionCreate inserts a subscription with its first secret.
// ErrConflict if the id is taken (even by a deleted subscription).
func (s *Store) SubscriptionCreate(ctx context.Context, params *store.SubscriptionCreateParams) (*herald.Subscription, error) {
	sub := params.Subscription
	args, err := subscriptionArgs(sub)
	if err != nil {
		return nil, fmt.Errorf("sqlite: subscription create: %w", err)
	}
	dest, conn, err := store.DestinationColumns(sub)
	if err != nil {
		return nil, fmt.Errorf("sqlite: subscription create: %w", err)
	}
	secret, err := s.keys.Seal(params.Secret, store.SecretAAD(sub.ID))
	if err != nil {
		return nil, fmt.Errorf("sqlite: subscription create: %w", err)
	}
	var out *herald.Subscription
	err = s.writeTx(ctx, "subscription create", func(tx queryer) error {
		if err := connectionExists(ctx, tx, conn); err != nil {
			return err
		}
		var exists int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM subscriptions WHERE id = ?`, sub.ID).Scan(&exists)
		if err == nil {
			return herald.Conflictf("subscription %s already exists", sub.ID)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO subscriptions (`+subscriptionColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			append(append([]any{sub.ID}, args...), ms(sub.CreatedAt), ms(sub.UpdatedAt), sub.Tenant, sub.AllTenants,
				dest, conn, autoDisableColumn(sub))...); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO subscription_secrets (subscription_id, secret, created_at)
			VALUES (?, ?, ?)`, sub.ID, secret, ms(params.Now)); err != nil {
			return err
		}
		if err := bumpSubscriptionsVersion(ctx, tx); err != nil {
			return err
		}
		out, err = getSubscription(ctx, tx, sub.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SubscriptionGet returns one subscription or ErrNotFound.
func (s *Store) SubscriptionGet(ctx context.Context, id string) (*herald.Subscription, error) {
	var out *herald.Subscription
	err := s.readTx(ctx, "subscription get", func(tx queryer) error {
		var err error
		out, err = getSubscription(ctx, tx, id)
		return err
	})
	return out, err
}

// SubscriptionList pages through subscriptions in id order.
func (s *Store) SubscriptionList(ctx context.Context, params *store.SubscriptionListParams) (*store.SubscriptionListResult, error) {
	limit := store.PageLimit(params.Limit)
	res := &store.SubscriptionListResult{}
	err := s.readTx(ctx, "subscription list", func(tx queryer) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+subscriptionColumns+` FROM subscriptions
			WHERE deleted_at IS NULL AND id > ? AND (? = '' OR tenant = ?) ORDER BY id LIMIT ?`,
			params.After, params.Tenant, params.Tenant, limit+1)
		if err != nil {
			return err
		}
		res.Subscriptions, err = scanSubscriptions(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(res.Subscriptions) > limit {
		res.Subscriptions, res.More = res.Subscriptions[:limit], true
	}
	return res, nil
}

func scanSubscriptions(rows *sql.Rows) ([]*herald.Subscription, error) {
	defer rows.Close()
	var out []*herald.Subscription
	for rows.Next() {
		sub, err := scanSubscription(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sub)
	}
	return out, rows.Err()
}

// SubscriptionListAll returns every live subscription with both versions
// read in the same snapshot.
func (s *Store) SubscriptionListAll(ctx context.Context) (*store.SubscriptionListAllResult, error) {
	res := &store.SubscriptionListAllResult{}
	err := s.readTx(ctx, "subscription list all", func(tx queryer) error {
		if err := tx.QueryRowContext(ctx, versionsSQL).Scan(&res.Version, &res.PausesVersion); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+subscriptionColumns+` FROM subscriptions
			WHERE deleted_at IS NULL ORDER BY id`)
		if err != nil {
			return err
		}
		if res.Subscriptions, err = scanSubscriptions(rows); err != nil {
			return err
		}
		res.Secrets, err = listAllSecrets(ctx, tx, s.keys)
		if err != nil {
			return err
		}
		res.PausedUntil, err = listAllPauses(ctx, tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// listAllSecrets reads every secret of live subscriptions, newest first.
func listAllSecrets(ctx context.Context, tx queryer, keys *seal.Ring) (map[string][]herald.Secret, error) {
	rows, err := tx.QueryContext(ctx, `SELECT x.subscription_id, x.secret, x.created_at, x.expires_at
		FROM subscription_secrets x JOIN subscriptions s ON s.id = x.subscription_id
		WHERE s.deleted_at IS NULL
		ORDER BY x.subscription_id, x.created_at DESC, x.id DESC`)
	if err != nil {
		return nil, err
	}
	return scanSecretsBySubscription(rows, keys)
}

// scanSecretsBySubscription reads (subscription_id, secret, created_at,
// expires_at) rows, keeping their order per subscription, opens each secret
// with keys, and closes rows.
func scanSecretsBySubscription(rows *sql.Rows, keys *seal.Ring) (map[string][]herald.Secret, error) {
	defer rows.Close()
	out := map[string][]herald.Secret{}
	for rows.Next() {
		var (
			subID     string
			sec       herald.Secret
			createdAt int64
			expiresAt sql.NullInt64
		)
		if err := rows.Scan(&subID, &sec.Value, &createdAt, &expiresAt); err != nil {
			return nil, err
		}
		sec.CreatedAt, sec.ExpiresAt = fromMS(createdAt), fromNullMS(expiresAt)
		store.SecretOpen(keys, &sec, subID)
		out[subID] = append(out[subID], sec)
	}
	return out, rows.Err()
}

// listAllPauses reads paused_until of live subscriptions that have one.
func listAllPauses(ctx context.Context, tx queryer) (map[string]time.Time, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, paused_until FROM subscriptions
		WHERE deleted_at IS NULL AND paused_until IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var id string
		var until int64
		if err := rows.Scan(&id, &until); err != nil {
			return nil, err
		}
		out[id] = fromMS(until)
	}
	return out, rows.Err()
}

// SubscriptionsVersion returns the subscriptions and pauses change
// counters.
func (s *Store) SubscriptionsVersion(ctx context.Context) (store.SubscriptionsVersions, error) {
	var v store.SubscriptionsVersions
	err := s.rdb.QueryRowContext(ctx, versionsSQL).Scan(&v.Subscriptions, &v.Pauses)
	if err != nil {
		return store.SubscriptionsVersions{}, fmt.Errorf("sqlite: subscriptions version: %w", unavailable(err))
	}
	return v, nil
}

// SubscriptionPauseList returns the pauses of live subscriptions with the
// pauses version, read in one snapshot.
func (s *Store) SubscriptionPauseList(ctx context.Context) (*store.SubscriptionPauseListResult, error) {
	res := &store.SubscriptionPauseListResult{}
	err := s.readTx(ctx, "subscription pause list", func(tx queryer) error {
		if err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'pauses_version'`).Scan(&res.Version); err != nil {
			return err
		}
		var err error
		res.PausedUntil, err = listAllPauses(ctx, tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// SubscriptionUpdate replaces the mutable fields. updated_at is params.Now
// when set, else Subscription.UpdatedAt.
func (s *Store) SubscriptionUpdate(ctx context.Context, params *store.SubscriptionUpdateParams) (*herald.Subscription, error) {
	sub := params.Subscription
	args, err := subscriptionArgs(sub)
	if err != nil {
		return nil, fmt.Errorf("sqlite: subscription update: %w", err)
	}
	dest, conn, err := store.DestinationColumns(sub)
	if err != nil {
		return nil, fmt.Errorf("sqlite: subscription update: %w", err)
	}
	updatedAt := sub.UpdatedAt
	if !params.Now.IsZero() {
		updatedAt = params.Now
	}
	var out *herald.Subscription
	err = s.writeTx(ctx, "subscription update", func(tx queryer) error {
		if err := connectionExists(ctx, tx, conn); err != nil {
			return err
		}
		// Re-enabling a disabled subscription starts its failure streak
		// afresh (store/health.go), before the state changes.
		if sub.State == herald.SubscriptionEnabled {
			if _, err := tx.ExecContext(ctx, healthResetSQL, sub.ID); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, `UPDATE subscriptions SET url = ?, method = ?, event_types = ?,
			filter = ?, headers = ?, ordering = ?, key_interval_ms = ?, rate_max = ?, rate_per_seconds = ?,
			max_in_flight = ?, timeout_ms = ?, description = ?, metadata = ?, state = ?, disabled_reason = ?,
			updated_at = ?, destination = ?, connection = ?, auto_disable = ?
			WHERE id = ? AND deleted_at IS NULL`, append(args, ms(updatedAt), dest, conn, autoDisableColumn(sub), sub.ID)...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return herald.NotFoundf("subscription %s not found", sub.ID)
		}
		if err := bumpSubscriptionsVersion(ctx, tx); err != nil {
			return err
		}
		out, err = getSubscription(ctx, tx, sub.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SubscriptionDelete soft-deletes a subscription (its deliveries keep their
// foreign key) and cancels its pending and in-flight deliveries. A worker
// still holding one of those finds its completion counted as stale.
func (s *Store) SubscriptionDelete(ctx context.Context, params *store.SubscriptionDeleteParams) error {
	now := ms(params.Now)
	return s.writeTx(ctx, "subscription delete", func(tx queryer) error {
		res, err := tx.ExecContext(ctx, `UPDATE subscriptions SET deleted_at = ?, updated_at = ?
			WHERE id = ? AND deleted_at IS NULL`, now, now, params.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return herald.NotFoundf("subscription %s not found", params.ID)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'cancelled', next_attempt_at = NULL,
			lease_owner = NULL, lease_until = NULL, updated_at = ?
			WHERE subscription_id = ? AND state IN ('pending', 'in_flight')`, now, params.ID); err != nil {
			return err
		}
		return bumpSubscriptionsVersion(ctx, tx)
	})
}

// SubscriptionSecretRotate adds a new secret; older ones without an earlier
// expiry expire at GraceUntil.
func (s *Store) SubscriptionSecretRotate(ctx context.Context, params *store.SubscriptionSecretRotateParams) error {
	grace := ms(params.GraceUntil)
	secret, err := s.keys.Seal(params.NewSecret, store.SecretAAD(params.ID))
	if err != nil {
		return fmt.Errorf("sqlite: subscription secret rotate: %w", err)
	}
	return s.writeTx(ctx, "subscription secret rotate", func(tx queryer) error {
		if _, err := getSubscription(ctx, tx, params.ID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE subscription_secrets SET expires_at = ?
			WHERE subscription_id = ? AND (expires_at IS NULL OR expires_at > ?)`, grace, params.ID, grace); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO subscription_secrets (subscription_id, secret, created_at)
			VALUES (?, ?, ?)`, params.ID, secret, ms(params.Now)); err != nil {
			return err
		}
		return bumpSubscriptionsVersion(ctx, tx)
	})
}

// SubscriptionSecretList returns every secret of a subscription, newest
// first.
func (s *Store) SubscriptionSecretList(ctx context.Context, id string) ([]herald.Secret, error) {
	var out []herald.Secret
	err := s.readTx(ctx, "subscription secret list", func(tx queryer) error {
		if _, err := getSubscription(ctx, tx, id); err != nil {
			return err
		}
		var err error
		out, err = listSecrets(ctx, tx, s.keys, id, nil)
		return err
	})
	return out, err
}

// listSecrets returns a subscription's secrets newest first; with activeAt
// set, only those still active then.
func listSecrets(ctx context.Context, q queryer, keys *seal.Ring, subID string, activeAt *int64) ([]herald.Secret, error) {
	query := `SELECT secret, created_at, expires_at FROM subscription_secrets WHERE subscription_id = ?`
	args := []any{subID}
	if activeAt != nil {
		query += ` AND (expires_at IS NULL OR expires_at > ?)`
		args = append(args, *activeAt)
	}
	rows, err := q.QueryContext(ctx, query+` ORDER BY created_at DESC, id DESC`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []herald.Secret{}
	for rows.Next() {
		var (
			sec       herald.Secret
			createdAt int64
			expiresAt sql.NullInt64
		)
		if err := rows.Scan(&sec.Value, &createdAt, &expiresAt); err != nil {
			return nil, err
		}
		sec.CreatedAt = fromMS(createdAt)
		sec.ExpiresAt = fromNullMS(expiresAt)
		store.SecretOpen(keys, &sec, subID)
		out = append(out, sec)
	}
	return out, rows.Err()
}
