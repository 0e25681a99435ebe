package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/seal"
	"github.com/heraldhq/herald/store"
)

// APITokenCreate stores a token hash. Storing the same hash twice is not an
// error: the token exists either way.
func (s *Store) APITokenCreate(ctx context.Context, params *store.APITokenCreateParams) error {
	const op = "error creating api token"
	db, err := s.db(op)
	if err != nil {
		return err
	}
	p := *params
	p.Defaults()
	var expires *time.Time
	if p.ExpiresAt != nil {
		at := ms(*p.ExpiresAt)
		expires = &at
	}
	_, err = db.Exec(ctx, `INSERT INTO api_tokens (hash, id, name, scopes, tenant, expires_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
		p.Hash, p.ID, p.Name, p.Scopes, p.Tenant, expires, ms(p.Now))
	return mapErr(op, err)
}

const apiTokenColumns = "id, hash, name, scopes, tenant, expires_at, created_at"

func scanAPIToken(row pgx.Row) (*store.APIToken, error) {
	var t store.APIToken
	if err := row.Scan(&t.ID, &t.Hash, &t.Name, &t.Scopes, &t.Tenant, &t.ExpiresAt, &t.CreatedAt); err != nil {
		return nil, err
	}
	if t.ExpiresAt != nil {
		at := t.ExpiresAt.UTC()
		t.ExpiresAt = &at
	}
	t.CreatedAt = t.CreatedAt.UTC()
	return &t, nil
}

// APITokenGet returns the token stored with this hash (a primary-key read).
func (s *Store) APITokenGet(ctx context.Context, hash string) (*store.APIToken, error) {
	const op = "error reading api token"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	t, err := scanAPIToken(db.QueryRow(ctx, "SELECT "+apiTokenColumns+" FROM api_tokens WHERE hash = $1", hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, herald.NotFoundf("api token not found")
	}
	return t, mapErr(op, err)
}

// APITokenList returns every token, oldest first.
func (s *Store) APITokenList(ctx context.Context) ([]*store.APIToken, error) {
	const op = "error listing api tokens"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, "SELECT "+apiTokenColumns+" FROM api_tokens ORDER BY created_at, id")
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.APIToken, error) { return scanAPIToken(row) })
	return out, mapErr(op, err)
}

// APITokenDelete removes a token.
func (s *Store) APITokenDelete(ctx context.Context, id string) error {
	const op = "error deleting api token"
	db, err := s.db(op)
	if err != nil {
		return err
	}
	tag, err := db.Exec(ctx, "DELETE FROM api_tokens WHERE id = $1", id)
	if err != nil {
		return mapErr(op, err)
	}
	if tag.RowsAffected() == 0 {
		return herald.NotFoundf("api token %s not found", id)
	}
	return nil
}

// APITokenExists reports whether a token with this hash is stored.
func (s *Store) APITokenExists(ctx context.Context, hash string) (bool, error) {
	const op = "error reading api token"
	db, err := s.db(op)
	if err != nil {
		return false, err
	}
	var ok bool
	err = db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM api_tokens WHERE hash = $1)", hash).Scan(&ok)
	return ok, mapErr(op, err)
}

// APITokenCount counts stored tokens.
func (s *Store) APITokenCount(ctx context.Context) (int, error) {
	const op = "error counting api tokens"
	db, err := s.db(op)
	if err != nil {
		return 0, err
	}
	var n int
	err = db.QueryRow(ctx, "SELECT count(*) FROM api_tokens").Scan(&n)
	return n, mapErr(op, err)
}

// subscriptionColumns is the select list scanSubscription reads. json
// columns are read as text so their bytes come back as written.
const subscriptionColumns = `id, url, method, event_types, filter_cel, filter_jmespath,
	filter_es_query::text, headers::text, ordering, key_interval_ms, rate_limit_max,
	rate_limit_per_seconds, max_in_flight, timeout_ms, description, metadata::text, state,
	disabled_reason, created_at, updated_at, tenant, all_tenants, destination::text, auto_disable::text`

func scanSubscription(row pgx.Row) (*herald.Subscription, error) {
	var (
		sub                 herald.Subscription
		cel, jmes           string
		esQuery, headers    *string
		metadata            *string
		rateMax, ratePerSec *int
		ordering, state     string
		dest, autoDisable   *string
	)
	err := row.Scan(&sub.ID, &sub.URL, &sub.Method, &sub.EventTypes, &cel, &jmes,
		&esQuery, &headers, &ordering, &sub.KeyIntervalMS, &rateMax,
		&ratePerSec, &sub.MaxInFlight, &sub.TimeoutMS, &sub.Description, &metadata, &state,
		&sub.DisabledReason, &sub.CreatedAt, &sub.UpdatedAt, &sub.Tenant, &sub.AllTenants, &dest, &autoDisable)
	if err != nil {
		return nil, err
	}
	if err := store.DestinationFill(&sub, dest); err != nil {
		return nil, err
	}
	sub.Ordering = herald.Ordering(ordering)
	sub.State = herald.SubscriptionState(state)
	sub.CreatedAt = sub.CreatedAt.UTC()
	sub.UpdatedAt = sub.UpdatedAt.UTC()
	if cel != "" || jmes != "" || esQuery != nil {
		sub.Filter = &herald.Filter{CEL: cel, JMESPath: jmes}
		if esQuery != nil {
			sub.Filter.ESQuery = json.RawMessage(*esQuery)
		}
	}
	if headers != nil {
		if err := json.Unmarshal([]byte(*headers), &sub.Headers); err != nil {
			return nil, fmt.Errorf("error decoding headers of %s: %w", sub.ID, err)
		}
	}
	if metadata != nil {
		sub.Metadata = json.RawMessage(*metadata)
	}
	if rateMax != nil && ratePerSec != nil {
		sub.RateLimit = &herald.RateLimit{Max: *rateMax, PerSeconds: *ratePerSec}
	}
	if autoDisable != nil {
		sub.AutoDisable = &herald.AutoDisable{}
		if err := json.Unmarshal([]byte(*autoDisable), sub.AutoDisable); err != nil {
			return nil, fmt.Errorf("error decoding auto_disable of %s: %w", sub.ID, err)
		}
	}
	return &sub, nil
}

// subscriptionArgs are the column values of sub in the order of the insert
// and update statements ($1…$22).
func subscriptionArgs(sub *herald.Subscription) ([]any, error) {
	dest, conn, err := store.DestinationColumns(sub)
	if err != nil {
		return nil, err
	}
	url, method := store.WebhookColumns(sub)
	var cel, jmes string
	var esQuery, headers, metadata *string
	if sub.Filter != nil {
		cel, jmes = sub.Filter.CEL, sub.Filter.JMESPath
		if len(sub.Filter.ESQuery) > 0 {
			v := string(sub.Filter.ESQuery)
			esQuery = &v
		}
	}
	if sub.Headers != nil {
		b, err := json.Marshal(sub.Headers)
		if err != nil {
			return nil, err
		}
		v := string(b)
		headers = &v
	}
	if len(sub.Metadata) > 0 {
		v := string(sub.Metadata)
		metadata = &v
	}
	var rateMax, ratePerSec *int
	if sub.RateLimit != nil {
		rateMax, ratePerSec = &sub.RateLimit.Max, &sub.RateLimit.PerSeconds
	}
	return []any{sub.ID, url, method, sub.EventTypes, cel, jmes, esQuery, headers,
		string(sub.Ordering), sub.KeyIntervalMS, rateMax, ratePerSec, sub.MaxInFlight,
		sub.TimeoutMS, sub.Description, metadata, string(sub.State), sub.DisabledReason,
		ms(sub.UpdatedAt), dest, conn, autoDisableColumn(sub)}, nil
}

const bumpVersionSQL = "UPDATE subscriptions_version SET version = version + 1"

// SubscriptionCreate inserts a subscription with its first secret.
func (s *Store) SubscriptionCreate(ctx context.Context, params *store.SubscriptionCreateParams) (*herald.Subscription, error) {
	sub := params.Subscription
	args, err := subscriptionArgs(sub)
	if err != nil {
		return nil, fmt.Errorf("error creating subscription: %w", err)
	}
	args = append(args, ms(sub.CreatedAt), sub.Tenant, sub.AllTenants)
	var out *herald.Subscription
	err = s.inTx(ctx, "error creating subscription", func(tx pgx.Tx) error {
		if err := shareConnection(ctx, tx, sub); err != nil {
			return err
		}
		row := tx.QueryRow(ctx, `INSERT INTO subscriptions (id, url, method, event_types, filter_cel,
			filter_jmespath, filter_es_query, headers, ordering, key_interval_ms, rate_limit_max,
			rate_limit_per_seconds, max_in_flight, timeout_ms, description, metadata, state,
			disabled_reason, updated_at, destination, connection, auto_disable, created_at, tenant, all_tenants)
			VALUES ($1, $2, $3, $4, $5, $6, $7::json, $8::jsonb, $9, $10, $11, $12, $13, $14, $15,
			$16::json, $17, $18, $19, $20::jsonb, $21, $22::jsonb, $23, $24, $25)
			RETURNING `+subscriptionColumns, args...)
		var err error
		if out, err = scanSubscription(row); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "23505" {
				return herald.Conflictf("subscription %s already exists", sub.ID)
			}
			return err
		}
		secret, err := s.keys.Seal(params.Secret, store.SecretAAD(sub.ID))
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO subscription_secrets (subscription_id, value, created_at) VALUES ($1, $2, $3)",
			sub.ID, secret, ms(params.Now)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, bumpVersionSQL)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.orderedInvalidate() // an ordered subscription may exist now (ordering.go)
	return out, nil
}

// SubscriptionGet returns one subscription that is not deleted.
func (s *Store) SubscriptionGet(ctx context.Context, id string) (*herald.Subscription, error) {
	const op = "error reading subscription"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	sub, err := scanSubscription(db.QueryRow(ctx,
		"SELECT "+subscriptionColumns+" FROM subscriptions WHERE id = $1 AND deleted_at IS NULL", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, herald.NotFoundf("subscription %s not found", id)
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	return sub, nil
}

func collectSubscriptions(rows pgx.Rows) ([]*herald.Subscription, error) {
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

// SubscriptionList pages through subscriptions in id order.
func (s *Store) SubscriptionList(ctx context.Context, params *store.SubscriptionListParams) (*store.SubscriptionListResult, error) {
	const op = "error listing subscriptions"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	limit := store.PageLimit(params.Limit)
	rows, err := db.Query(ctx, "SELECT "+subscriptionColumns+` FROM subscriptions
		WHERE deleted_at IS NULL AND id > $1 AND ($3 = '' OR tenant = $3) ORDER BY id LIMIT $2`,
		params.After, limit+1, params.Tenant)
	if err != nil {
		return nil, mapErr(op, err)
	}
	subs, err := collectSubscriptions(rows)
	if err != nil {
		return nil, mapErr(op, err)
	}
	res := &store.SubscriptionListResult{Subscriptions: subs}
	if len(subs) > limit {
		res.Subscriptions, res.More = subs[:limit], true
	}
	return res, nil
}

// SubscriptionListAll returns every subscription with both versions, read
// in one REPEATABLE READ snapshot so the versions match the list exactly.
func (s *Store) SubscriptionListAll(ctx context.Context) (*store.SubscriptionListAllResult, error) {
	const op = "error listing subscriptions"
	if s.closed.Load() {
		return nil, unavailable(op, errors.New("store closed"))
	}
	res := &store.SubscriptionListAllResult{}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, versionsSQL).Scan(&res.Version, &res.PausesVersion); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, "SELECT "+subscriptionColumns+" FROM subscriptions WHERE deleted_at IS NULL ORDER BY id")
			if err != nil {
				return err
			}
			if res.Subscriptions, err = collectSubscriptions(rows); err != nil {
				return err
			}
			if res.Secrets, err = listAllSecrets(ctx, tx, s.keys); err != nil {
				return err
			}
			res.PausedUntil, err = listAllPauses(ctx, tx)
			return err
		})
	if err != nil {
		return nil, mapErr(op, err)
	}
	return res, nil
}

// listAllSecrets reads every secret of live subscriptions, newest first.
func listAllSecrets(ctx context.Context, tx pgx.Tx, keys *seal.Ring) (map[string][]herald.Secret, error) {
	rows, err := tx.Query(ctx, `SELECT x.subscription_id, x.value, x.created_at, x.expires_at
		FROM subscription_secrets x JOIN subscriptions s ON s.id = x.subscription_id
		WHERE s.deleted_at IS NULL
		ORDER BY x.subscription_id, x.created_at DESC, x.id DESC`)
	if err != nil {
		return nil, err
	}
	out := map[string][]herald.Secret{}
	_, err = collectSecrets(rows, keys, out, "")
	return out, err
}

// listAllPauses reads paused_until of live subscriptions that have one.
func listAllPauses(ctx context.Context, tx pgx.Tx) (map[string]time.Time, error) {
	rows, err := tx.Query(ctx, `SELECT id, paused_until FROM subscriptions
		WHERE deleted_at IS NULL AND paused_until IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	var (
		id    string
		until time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &until}, func() error {
		out[id] = until.UTC()
		return nil
	})
	return out, err
}

// versionsSQL reads both change counters (store.SubscriptionsVersions).
const versionsSQL = "SELECT version, pauses_version FROM subscriptions_version"

// SubscriptionsVersion returns the subscriptions and pauses change
// counters.
func (s *Store) SubscriptionsVersion(ctx context.Context) (store.SubscriptionsVersions, error) {
	const op = "error reading subscriptions version"
	db, err := s.db(op)
	if err != nil {
		return store.SubscriptionsVersions{}, err
	}
	var v store.SubscriptionsVersions
	if err := db.QueryRow(ctx, versionsSQL).Scan(&v.Subscriptions, &v.Pauses); err != nil {
		return store.SubscriptionsVersions{}, mapErr(op, err)
	}
	return v, nil
}

// SubscriptionPauseList returns the pauses of live subscriptions with the
// pauses version: one statement, so one snapshot and one round trip.
func (s *Store) SubscriptionPauseList(ctx context.Context) (*store.SubscriptionPauseListResult, error) {
	const op = "error listing subscription pauses"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	var (
		ids    []string
		until  []time.Time
		result = &store.SubscriptionPauseListResult{}
	)
	err = db.QueryRow(ctx, `SELECT v.pauses_version,
		ARRAY(SELECT id FROM subscriptions WHERE deleted_at IS NULL AND paused_until IS NOT NULL ORDER BY id),
		ARRAY(SELECT paused_until FROM subscriptions WHERE deleted_at IS NULL AND paused_until IS NOT NULL ORDER BY id)
		FROM subscriptions_version v`).Scan(&result.Version, &ids, &until)
	if err != nil {
		return nil, mapErr(op, err)
	}
	if len(ids) != len(until) {
		return nil, fmt.Errorf("%s: %d ids for %d pauses", op, len(ids), len(until))
	}
	result.PausedUntil = make(map[string]time.Time, len(ids))
	for i, id := range ids {
		result.PausedUntil[id] = until[i].UTC()
	}
	return result, nil
}

// SubscriptionUpdate writes every mutable field of a subscription.
func (s *Store) SubscriptionUpdate(ctx context.Context, params *store.SubscriptionUpdateParams) (*herald.Subscription, error) {
	sub := *params.Subscription
	if sub.UpdatedAt.IsZero() {
		sub.UpdatedAt = params.Now
	}
	args, err := subscriptionArgs(&sub)
	if err != nil {
		return nil, fmt.Errorf("error updating subscription: %w", err)
	}
	var out *herald.Subscription
	err = s.inTx(ctx, "error updating subscription", func(tx pgx.Tx) error {
		if err := shareConnection(ctx, tx, &sub); err != nil {
			return err
		}
		// Re-enabling a disabled subscription starts its failure streak
		// afresh (store/health.go), before the state changes.
		if sub.State == herald.SubscriptionEnabled {
			if _, err := tx.Exec(ctx, healthResetSQL, sub.ID); err != nil {
				return err
			}
		}
		row := tx.QueryRow(ctx, `UPDATE subscriptions SET url = $2, method = $3, event_types = $4,
			filter_cel = $5, filter_jmespath = $6, filter_es_query = $7::json, headers = $8::jsonb,
			ordering = $9, key_interval_ms = $10, rate_limit_max = $11, rate_limit_per_seconds = $12,
			max_in_flight = $13, timeout_ms = $14, description = $15, metadata = $16::json,
			state = $17, disabled_reason = $18, updated_at = $19, destination = $20::jsonb, connection = $21,
			auto_disable = $22::jsonb
			WHERE id = $1 AND deleted_at IS NULL
			RETURNING `+subscriptionColumns, args...)
		var err error
		out, err = scanSubscription(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return herald.NotFoundf("subscription %s not found", sub.ID)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, bumpVersionSQL)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.orderedInvalidate() // its ordering may have changed (ordering.go)
	return out, nil
}

// SubscriptionDelete soft-deletes a subscription and cancels its unfinished
// deliveries, in two transactions. The first locks the row FOR UPDATE: that
// waits for every EventInsertMany holding it FOR KEY SHARE (see
// insertManySQL), so their deliveries are committed before it is, and
// inserts after it see the subscription deleted. The second, the
// cancellation, then sees every delivery the subscription will ever have.
// Cancelling inside the first held the row while the UPDATE waited for the
// completions of the subscription's in-flight deliveries, and every publish
// that fanned out to it waited too (TestChaos: ~1 s stalls of healthy
// subscriptions while others churned). A crash between the two leaves
// deliveries no claim takes (claims skip deleted subscriptions) until the
// maintainer's CancelOrphaned.
func (s *Store) SubscriptionDelete(ctx context.Context, params *store.SubscriptionDeleteParams) error {
	now := ms(params.Now)
	err := s.inTx(ctx, "error deleting subscription", func(tx pgx.Tx) error {
		if err := lockLiveSubscription(ctx, tx, params.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE subscriptions SET deleted_at = $2, updated_at = $2 WHERE id = $1",
			params.ID, now); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, bumpVersionSQL)
		return err
	})
	if err != nil {
		return err
	}
	return s.inTx(ctx, "error cancelling a deleted subscription's deliveries", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE deliveries SET state = 'cancelled', next_attempt_at = NULL,
			lease_owner = NULL, lease_until = NULL, updated_at = $2
			WHERE subscription_id = $1 AND state IN ('pending', 'in_flight')`, params.ID, now)
		return err
	})
}

// lockLiveSubscription locks a subscription row for a change of its
// secrets or its deletion, or returns ErrNotFound.
func lockLiveSubscription(ctx context.Context, tx pgx.Tx, id string) error {
	var one int
	err := tx.QueryRow(ctx, "SELECT 1 FROM subscriptions WHERE id = $1 AND deleted_at IS NULL FOR UPDATE", id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return herald.NotFoundf("subscription %s not found", id)
	}
	return err
}

// SubscriptionSecretRotate adds a secret and sets older ones to expire at
// GraceUntil unless they already expire earlier.
func (s *Store) SubscriptionSecretRotate(ctx context.Context, params *store.SubscriptionSecretRotateParams) error {
	return s.inTx(ctx, "error rotating secret", func(tx pgx.Tx) error {
		if err := lockLiveSubscription(ctx, tx, params.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE subscription_secrets SET expires_at = $2
			WHERE subscription_id = $1 AND (expires_at IS NULL OR expires_at > $2)`,
			params.ID, ms(params.GraceUntil)); err != nil {
			return err
		}
		secret, err := s.keys.Seal(params.NewSecret, store.SecretAAD(params.ID))
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO subscription_secrets (subscription_id, value, created_at) VALUES ($1, $2, $3)",
			params.ID, secret, ms(params.Now)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, bumpVersionSQL)
		return err
	})
}

// SubscriptionSecretList returns a subscription's secrets, newest first.
func (s *Store) SubscriptionSecretList(ctx context.Context, id string) ([]herald.Secret, error) {
	var out []herald.Secret
	err := s.inTx(ctx, "error listing secrets", func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM subscriptions WHERE id = $1 AND deleted_at IS NULL)", id).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return herald.NotFoundf("subscription %s not found", id)
		}
		rows, err := tx.Query(ctx, `SELECT value, created_at, expires_at FROM subscription_secrets
			WHERE subscription_id = $1 ORDER BY created_at DESC, id DESC`, id)
		if err != nil {
			return err
		}
		out, err = collectSecrets(rows, s.keys, nil, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// collectSecrets scans (value, created_at, expires_at) rows of subscription
// subID, or with bySub set (subscription_id, value, created_at, expires_at)
// rows grouped into it, and opens each secret with keys.
func collectSecrets(rows pgx.Rows, keys *seal.Ring, bySub map[string][]herald.Secret, subID string) ([]herald.Secret, error) {
	defer rows.Close()
	var out []herald.Secret
	for rows.Next() {
		var (
			sec     herald.Secret
			expires *time.Time
			err     error
		)
		if bySub != nil {
			err = rows.Scan(&subID, &sec.Value, &sec.CreatedAt, &expires)
		} else {
			err = rows.Scan(&sec.Value, &sec.CreatedAt, &expires)
		}
		if err != nil {
			return nil, err
		}
		sec.CreatedAt = sec.CreatedAt.UTC()
		sec.ExpiresAt = utcPtr(expires)
		store.SecretOpen(keys, &sec, subID)
		if bySub != nil {
			bySub[subID] = append(bySub[subID], sec)
		} else {
			out = append(out, sec)
		}
	}
	return out, rows.Err()
}
