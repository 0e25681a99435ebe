package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/seal"
	"github.com/heraldhq/herald/store"
)

// Config configures Open.
type Config struct {
	// URL is a postgres:// connection string.
	URL string
	// Schema, when set, is created if missing and used as the search_path
	// of every connection (tests give each test its own schema).
	Schema string
	// MaxConns caps the pool; 0 means the pgx default (pool_max_conns in
	// the URL, else max(4, CPUs): measured on 2 cores, a pool of 16 was
	// slower — more backends competing for the same cores).
	MaxConns int32
	// Keys seals subscription secrets at rest (nil: stored as plain text;
	// see store/secrets.go).
	Keys *seal.Ring
}

// Store is the PostgreSQL implementation of store.Store.
type Store struct {
	pool *pgxpool.Pool
	// hot is the small pool whose sessions run generic plans, kept for
	// small hot writes (smallWrites, claim.go).
	hot    *pgxpool.Pool
	schema string
	closed atomic.Bool
	// orderedMu guards ordered: whether fifo/latest subscriptions exist
	// (ordering.go).
	orderedMu sync.Mutex
	ordered   orderedCache
	// leader holds the maintenance leader's session (leader.go).
	leader leaderSession
	// liveness holds this node's liveness lock (liveness.go).
	liveness livenessSession
	// work debounces pg_notify on committed work (notify.go).
	work workNotifier
	// growth analyzes the active partition of deliveries when it grows
	// (analyze.go).
	growth growthAnalyzer
	// broken is when (unix nanos) a pooled connection last broke in use.
	broken *atomic.Int64
	// swept is where the retention sweep's scans of delivery_keys and
	// attempts stopped (store/retention.go).
	swept store.RetentionCursors
	// keys seals subscription secrets (Config.Keys).
	keys *seal.Ring
	// resealHook, set by tests only, runs in SecretReseal between its read
	// and its rewrites (a concurrent change lands there).
	resealHook func(ctx context.Context)
}

// BackendFlushAfter is the backend_flush_after herald's connections ask
// for unless the URL names one (see Open): the checkpointer's default,
// 256 kB.
const BackendFlushAfter = "256kB"

// paramDefault sets a session setting the URL did not name.
func paramDefault(params map[string]string, name, value string) {
	if _, ok := params[name]; !ok {
		params[name] = value
	}
}

// brokenPingWindow: for this long after a pooled connection broke, every
// connection is pinged when acquired, not only those idle over a second
// (pgx's default). A database outage or restart breaks every pooled
// connection at once, but the idle ones only show it when next used: without
// the ping, the first calls after the database is back (publishes among
// them) would each fail on one of them.
const brokenPingWindow = 10 * time.Second

// brokenTracer notes when a connection comes back to the pool broken (the
// pool destroys it without calling AfterRelease, hence a ReleaseTracer).
// Its query hooks, required by pgx.QueryTracer, do nothing.
type brokenTracer struct{ at *atomic.Int64 }

// TraceQueryStart implements pgx.QueryTracer.
func (brokenTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (brokenTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceRelease implements pgxpool.ReleaseTracer.
func (b brokenTracer) TraceRelease(_ *pgxpool.Pool, d pgxpool.TraceReleaseData) {
	if d.Conn.IsClosed() {
		b.at.Store(time.Now().UnixNano())
	}
}

var _ store.Store = (*Store)(nil)

// Open connects to PostgreSQL. It does not migrate; call Migrate. It checks
// that the server answers (creating Config.Schema if set), so a node started
// against a dead database fails at once with an error wrapping
// herald.ErrStoreUnavailable.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("error parsing database url: %w", err)
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	schema := cfg.Schema
	if schema != "" {
		// A startup parameter rather than a SET after connect: every
		// connection the pool ever opens gets it, with no extra round trip.
		pcfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	}
	// Session settings herald asks for as startup parameters (no extra
	// round trip); each is a default: the same name in the URL wins.
	params := pcfg.ConnConfig.RuntimeParams
	// herald's statements are few and hot, and their best plans depend on
	// table sizes that change by orders of magnitude (a fresh schema
	// fills in seconds): a generic plan cached per connection while a table
	// was nearly empty kept scanning whole tables long after (measured:
	// claims at 49 ms, EventInsertMany's read-back at 21 ms). Planning each
	// execution costs well under a millisecond.
	paramDefault(params, "plan_cache_mode", "force_custom_plan")
	// JIT compilation is for long analytical queries; herald's are short,
	// and the server decides by estimated cost, which a table without
	// fresh statistics inflates: retention's event sweep was compiled at
	// every run, 0.9 s of CPU for a statement that found nothing (issue
	// 28).
	paramDefault(params, "jit", "off")
	// A backend that writes dirty buffers out (shared_buffers is small
	// against herald's write rate) leaves them in the kernel's page cache
	// by default (backend_flush_after = 0), where 300 MB gathered in 30 s
	// and the kernel's writeback then wrote it in one go, stalling every
	// commit's WAL fsync behind it for tens of milliseconds (issue 28).
	// BackendFlushAfter asks the kernel to start writing early, as the
	// checkpointer and background writer already do (ADR 0039).
	paramDefault(params, "backend_flush_after", BackendFlushAfter)
	broken := &atomic.Int64{}
	pcfg.ConnConfig.Tracer = brokenTracer{broken}
	pcfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		return p.IdleDuration > time.Second || time.Since(time.Unix(0, broken.Load())) < brokenPingWindow
	}
	// The hot-write pool: the same connections' settings, but generic
	// plans and no sequential scans for the whole session, so a small
	// write batch does not open with genericPlansSQL (claim.go). It
	// connects on first use and holds at most hotConns connections.
	hcfg := pcfg.Copy()
	hcfg.MaxConns, hcfg.MinConns = hotConns, 0
	hcfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	hcfg.ConnConfig.RuntimeParams["enable_seqscan"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, mapErr("error creating pool", err)
	}
	hot, err := pgxpool.NewWithConfig(ctx, hcfg)
	if err != nil {
		pool.Close()
		return nil, mapErr("error creating pool", err)
	}
	s := &Store{pool: pool, hot: hot, schema: schema, broken: broken, keys: cfg.Keys}
	s.growth.init()
	if schema != "" {
		_, err = pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize())
		// Two nodes creating the same schema at once can still collide on
		// the catalog's unique index; the schema exists either way.
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			err = nil
		}
		if err != nil {
			pool.Close()
			hot.Close()
			return nil, mapErr("error creating schema", err)
		}
	} else if err := pool.Ping(ctx); err != nil {
		pool.Close()
		hot.Close()
		return nil, mapErr("error connecting", err)
	}
	return s, nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return unavailable("error pinging", errors.New("store closed"))
	}
	return mapErr("error pinging", s.pool.Ping(ctx))
}

// Close releases the pool's connections.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.work.close()
		s.growth.close()
		s.leader.close()
		s.liveness.close()
		s.pool.Close()
		s.hot.Close()
	}
	return nil
}

// migrations follow the rule of store/migrate.go: numbered 1, 2, 3…
// without a gap, the same numbers as SQLite's.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the embedded migrations in version order.
func migrations() ([]store.Migration, error) {
	ms, err := store.MigrationsLoad(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return ms, nil
}

// LatestSchemaVersion is the newest schema version this code knows.
func LatestSchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

// migrateLockClass is the first key of herald's migration advisory lock; the
// second is a hash of the schema, so tests migrating their own schemas in
// parallel do not wait for one another.
const migrateLockClass = 0x68726c64 // "hrld"

// Migrate applies the embedded migrations not yet applied, all in one
// transaction under an advisory lock (store.MigrateApply). A schema newer
// than the code is refused (store.ErrSchemaTooNew).
func (s *Store) Migrate(ctx context.Context) error {
	return s.migrateTo(ctx, 0)
}

// migrateTo is Migrate stopping after version upTo (0: the newest); tests
// use it to check that a migration carries existing rows over.
func (s *Store) migrateTo(ctx context.Context, upTo int) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return store.MigrateApply(ctx, migrator{s: s}, &store.MigrateApplyParams{Migrations: ms, UpTo: upTo})
}

// migrator is the store as a store.MigrateBackend and, inside its
// transaction, a store.MigrateTx.
type migrator struct {
	s  *Store
	tx pgx.Tx
}

// MigrateTx runs fn in a transaction holding the migration advisory lock
// (released at commit), so nodes booting together migrate once.
func (m migrator) MigrateTx(ctx context.Context, fn func(tx store.MigrateTx) error) error {
	return m.s.inTx(ctx, "error migrating", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))", migrateLockClass); err != nil {
			return err
		}
		return fn(migrator{s: m.s, tx: tx})
	})
}

// MigrationTableEnsure creates store.MigrationTable (PostgreSQL's
// bookkeeping table always had that name).
func (m migrator) MigrationTableEnsure(ctx context.Context) error {
	_, err := m.tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+store.MigrationTable+` (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`)
	return err
}

func (m migrator) MigrationVersionGet(ctx context.Context) (int, error) {
	var v int
	err := m.tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+store.MigrationTable).Scan(&v)
	return v, err
}

func (m migrator) MigrationExec(ctx context.Context, mig *store.Migration) error {
	_, err := m.tx.Exec(ctx, mig.SQL)
	return err
}

func (m migrator) MigrationRecord(ctx context.Context, mig *store.Migration) error {
	_, err := m.tx.Exec(ctx, "INSERT INTO "+store.MigrationTable+" (version, name) VALUES ($1, $2)", mig.Version, mig.Name)
	return err
}

// MigrationGuard has nothing to check: PostgreSQL checks foreign keys as
// the migrations run.
func (m migrator) MigrationGuard(context.Context) (func(context.Context) error, error) {
	return nil, nil
}

// querier is what pgx.Tx and *pgxpool.Pool share; helpers that run either
// inside a transaction or on their own take it.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// inTx runs fn in a transaction, committing when it returns nil. Errors are
// mapped with op as context; herald errors from fn pass through unchanged.
func (s *Store) inTx(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	if s.closed.Load() {
		return unavailable(op, errors.New("store closed"))
	}
	err := retryMoved(ctx, func() error { return pgx.BeginFunc(ctx, s.pool, fn) })
	return mapErr(op, err)
}

// movedTries bounds retryMoved: each retry runs on a fresh snapshot, so the
// row that moved is no longer in the way; a second conflict in a row is
// already rare.
const movedTries = 5

// retryMoved runs fn, and again while it fails with a serialization
// failure or a deadlock. Under READ COMMITTED the first comes from one
// source only: a statement waited for a row that the other transaction
// moved to another partition of deliveries (a delivery finished, retried or
// cancelled meanwhile; migration 005), which PostgreSQL reports as 40001
// instead of following the row. fn must be safe to run again: a whole
// transaction, or one statement (an implicit transaction).
func retryMoved(ctx context.Context, fn func() error) error {
	for try := 1; ; try++ {
		err := fn()
		if err == nil || try == movedTries || ctx.Err() != nil || !isRetryable(err) {
			return err
		}
	}
}

// execMoved is db.Exec of one statement under retryMoved.
func execMoved(ctx context.Context, db querier, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := retryMoved(ctx, func() (err error) {
		tag, err = db.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}

// isRetryable reports a serialization failure (40001) or a deadlock
// (40P01): the transaction did nothing and may simply run again.
func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// db returns the pool, or an error when the store is closed.
func (s *Store) db(op string) (querier, error) {
	if s.closed.Load() {
		return nil, unavailable(op, errors.New("store closed"))
	}
	return s.pool, nil
}

// mapErr wraps err with op, turning "the server cannot be reached" into
// herald.ErrStoreUnavailable so the API answers 503. herald errors (not
// found, conflict) pass through untouched.
func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var he *herald.Error
	if errors.As(err, &he) {
		return err
	}
	if isUnavailable(err) {
		return unavailable(op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func unavailable(op string, err error) error {
	return &herald.Error{
		Code:    herald.CodeStoreUnavailable,
		Message: "store unavailable",
		Err:     fmt.Errorf("%s: %w", op, err),
	}
}

// isUnavailable reports whether err means the database did not answer, as
// opposed to answering with an error.
func isUnavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P0x: the server is shutting
		// down or starting; 53300: too many connections.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "53300"
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr),
		errors.As(err, &netErr),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed),
		// A deadline that expired while talking to the server: from the
		// caller's side the store did not answer. A cancelled context is
		// the caller giving up and stays as it is.
		errors.Is(err, context.DeadlineExceeded),
		pgconn.SafeToRetry(err):
		return true
	}
	// puddle.ErrClosedPool (not imported: puddle is pgx's internal detail).
	return strings.Contains(err.Error(), "closed pool")
}

// ms truncates t to the stored precision (milliseconds) in UTC.
func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// msPtr is ms for optional times.
func msPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := ms(*t)
	return &v
}

// utcPtr converts a scanned optional time to UTC.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.UTC()
	return &v
}
