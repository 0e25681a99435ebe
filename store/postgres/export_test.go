package postgres

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldhq/herald/store"
)

// MigrateTo exposes migrateTo to the external tests.
func (s *Store) MigrateTo(ctx context.Context, upTo int) error { return s.migrateTo(ctx, upTo) }

// AttemptPlantOrphan stores an attempt for a delivery id that names no
// delivery, as DeliveryCompleteMany did before it refused to
// (storetest.OrphanAttemptPlanter).
func (s *Store) AttemptPlantOrphan(ctx context.Context, deliveryID string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO attempts (delivery_id, n, at, duration_ms, status, error, error_message, tier)
		VALUES ($1, 1, now(), 5, 500, 'http_status', 'endpoint answered 500', 0)`, deliveryID)
	return err
}

// RawSecrets reads the value column as stored (storetest.SecretsBackend).
func (s *Store) RawSecrets(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT value FROM subscription_secrets ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// SetResealHook sets a function SecretReseal runs between its read and its
// rewrites.
func (s *Store) SetResealHook(fn func(ctx context.Context)) { s.resealHook = fn }

// SetRawSecret overwrites one stored secret value, on its own connection.
func (s *Store) SetRawSecret(ctx context.Context, subscriptionID, value string) error {
	_, err := s.pool.Exec(ctx, `UPDATE subscription_secrets SET value = $2
		WHERE id = (SELECT min(id) FROM subscription_secrets WHERE subscription_id = $1)`, subscriptionID, value)
	return err
}

// ThrottleBothWays answers the throttle rule for one subscription at now
// twice: store.ThrottleState.Budget over the counts Go reads, and the SQL
// form the set-based statements use (throttleBudgetSQL,
// throttleReturnsSQL). ok is false when the subscription is not throttled.
func (s *Store) ThrottleBothWays(ctx context.Context, subID string, now time.Time) (goBudget int, goReturns time.Time,
	sqlBudget int, sqlReturns time.Time, ok bool, err error) {
	st, err := throttleStateRead(ctx, s.pool, subID, now)
	if err != nil || st == nil {
		return 0, time.Time{}, 0, time.Time{}, false, err
	}
	goBudget, _, goReturns = st.Budget(ms(now))
	var returns *time.Time
	err = s.pool.QueryRow(ctx, `SELECT `+throttleBudgetSQL+`, `+throttleReturnsSQL+` FROM subscriptions s WHERE s.id = @id`,
		pgx.NamedArgs{"id": subID, "now": ms(now), "throttle_margin_ms": store.ThrottleMargin.Milliseconds()}).
		Scan(&sqlBudget, &returns)
	if returns != nil {
		sqlReturns = returns.UTC()
	}
	return goBudget, goReturns.UTC(), sqlBudget, sqlReturns, true, err
}

// LivenessSetting reads a setting of the liveness lock's session.
func (s *Store) LivenessSetting(ctx context.Context, name string) (string, error) {
	s.liveness.mu.Lock()
	defer s.liveness.mu.Unlock()
	var v string
	err := s.liveness.conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}

// RawConnectionURLs reads the url column of connections as stored
// (storetest.SecretsBackend).
func (s *Store) RawConnectionURLs(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT url FROM connections ORDER BY name`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// SourceRejectsStored counts the rejects rows of a source, however many
// a read would show (storetest.SourceRejectCounter).
func (s *Store) SourceRejectsStored(ctx context.Context, source string) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM source_rejects WHERE source = $1`, source).Scan(&n)
	return n, err
}

// PreparedPlans reads pg_prepared_statements on one of the pool's
// connections and on every idle connection of the hot-write pool: for
// each prepared statement whose text contains one of marks, how many
// generic and custom plans it ran with. With MaxConns 1 that is every
// connection a call used.
func (s *Store) PreparedPlans(ctx context.Context, marks ...string) (map[string][2]int64, error) {
	out, err := s.PreparedPlansHot(ctx, marks...)
	if err != nil {
		return nil, err
	}
	return out, preparedPlans(ctx, s.pool, marks, out)
}

// PreparedPlansHot is PreparedPlans of the hot-write pool's idle
// connections alone.
func (s *Store) PreparedPlansHot(ctx context.Context, marks ...string) (map[string][2]int64, error) {
	out := map[string][2]int64{}
	for _, c := range s.hot.AcquireAllIdle(ctx) {
		err := preparedPlans(ctx, c, marks, out)
		c.Release()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// HotHold takes every connection of the hot-write pool until release is
// called, so small writes fall back to the main pool.
func (s *Store) HotHold(ctx context.Context) (release func(), err error) {
	var held []*pgxpool.Conn
	release = func() {
		for _, c := range held {
			c.Release()
		}
	}
	for range hotConns {
		c, err := s.hot.Acquire(ctx)
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, c)
	}
	return release, nil
}

func preparedPlans(ctx context.Context, q querier, marks []string, out map[string][2]int64) error {
	rows, err := q.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			stmt            string
			generic, custom int64
		)
		if err := rows.Scan(&stmt, &generic, &custom); err != nil {
			return err
		}
		for _, m := range marks {
			if strings.Contains(stmt, m) {
				p := out[m]
				out[m] = [2]int64{p[0] + generic, p[1] + custom}
			}
		}
	}
	return rows.Err()
}

// ClaimPlan is EXPLAIN's text of the claim statement for params, planned
// as DeliveryClaim plans it (custom plans, no rate limits) on the
// statistics the tables have now.
func (s *Store) ClaimPlan(ctx context.Context, params *store.DeliveryClaimParams) (string, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, customPlansSQL); err != nil {
		return "", err
	}
	args := claimArgs(params, params.Limit, params.Limit)
	args["throttle_margin_ms"] = store.ThrottleMargin.Milliseconds()
	rows, err := tx.Query(ctx, "EXPLAIN "+claimPlainSQL, args)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}

// GrowthAnalyzeOff stops the ANALYZE on growth (analyze.go) and waits for
// one running.
func (s *Store) GrowthAnalyzeOff() {
	s.growth.off.Store(true)
	s.growth.wg.Wait()
}

// GrowthAnalyzeRuns is how many ANALYZEs on growth started.
func (s *Store) GrowthAnalyzeRuns() int64 { return s.growth.runs.Load() }

// WorkPayload exposes workPayload (notify.go) to the external tests.
var WorkPayload = workPayload

// SessionSetting reads one setting as a connection of each pool sees it
// (main, hot), for tests of what Open asks of every session.
func (s *Store) SessionSetting(ctx context.Context, name string) (mainPool, hotPool string, err error) {
	if err = s.pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&mainPool); err != nil {
		return "", "", err
	}
	err = s.hot.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&hotPool)
	return mainPool, hotPool, err
}

// InsertSpelling names a spelling of a one-event insert: its token guard
// ("none", "one" or "many", as tokenGuard) and whether it is the
// one-delivery form.
type InsertSpelling struct {
	Tokens      string
	OneDelivery bool
}

// InsertOneVariant runs one event's insert on conn (a hot-pool connection
// of BenchmarkEventInsertSpelling, generic plans set for its session) in
// the given spelling, with tokens as a node's publish passes them.
func (s *Store) InsertOneVariant(ctx context.Context, conn *pgxpool.Conn, sp InsertSpelling, ev store.EventInsert, v *store.SubscriptionsVersions, tokens []store.TokenCheck, now time.Time) error {
	b := newEventBatch([]store.EventInsert{ev}, now)
	b.guard(v, tokens)
	sql, args := b.oneStatementAs(map[string]tokenGuard{"none": tokensNone, "one": tokensOne, "many": tokensMany}[sp.Tokens], sp.OneDelivery)
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	ins, err := readInsertedOne(rows, b.subs)
	if err != nil {
		return err
	}
	if ins.moved || ins.tokensGone {
		return store.ErrTokenGone
	}
	if len(ins.isNew) != 1 || len(ins.gone) != 0 {
		return errors.New("the insert stored no event, or left a delivery out")
	}
	return nil
}

// AcquireHot takes a connection of the hot-write pool (its sessions run
// generic plans without sequential scans, as a node's small writes do).
func (s *Store) AcquireHot(ctx context.Context) (*pgxpool.Conn, error) {
	return s.hot.Acquire(ctx)
}
