package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/seal"
	"github.com/heraldhq/herald/store"
)

// Defaults and limits of the connection setup.
const (
	// busyTimeout is how long a connection waits for SQLite's own file lock
	// (a checkpoint, or the reader pool racing the writer) before
	// SQLITE_BUSY. Writers are serialized in Go, so this is rarely reached.
	busyTimeout = 5 * time.Second
	// minReadConns is the floor of the read pool; it grows with GOMAXPROCS.
	minReadConns = 4
	// writerCacheKiB is the writer's page cache. SQLite's default (2 MiB)
	// keeps little of a 100k-delivery queue's indexes in memory, and every
	// miss is a read(2): with it, a claim from a 100k backlog measured
	// several times slower. Readers get readerCacheKiB each.
	//
	// It is not larger because a commit can cost time in proportion to the
	// cache: when a B-tree page split reorders pages (balance_nonroot), SQLite
	// parks a page under a temporary number past the 1 GiB pending-byte page,
	// which raises the cache's highest page number, and the commit after it
	// then walks the whole cache to drop pages beyond the end of the file
	// (pcache1TruncateUnsafe), page header by page header. Queue commits
	// split index pages all the time: at 64 MiB (16k pages) that walk was
	// 12–14% of the node's CPU while delivering a backlog (perf, issue 22),
	// at 16 MiB 2–3%, with claims from a 100k backlog as fast.
	writerCacheKiB = 16 << 10
	readerCacheKiB = 16 << 10
	// checkpointEvery is how often the background checkpointer copies the
	// WAL into the database file (see checkpointLoop).
	checkpointEvery = 100 * time.Millisecond
	// writerAutoCheckpoint is the writer's own checkpoint threshold in WAL
	// pages (SQLite's default is 1,000, about 4 MB). The background
	// checkpointer normally keeps the WAL far below it; it is the backstop
	// that bounds the WAL if the checkpointer falls behind.
	writerAutoCheckpoint = 16000
)

// stmtCacheSize is how many compiled statements each connection keeps
// (the driver's LRU cache). The hot paths use a few dozen distinct
// statements; multi-row inserts add one per batch size seen, which the LRU
// evicts first.
const stmtCacheSize = 128

// writerDriver is go-sqlite3 with the writer connection's setup: SQLite's
// default runs a checkpoint inside the commit that crosses 1,000 WAL pages,
// stalling that commit (and every publish queued behind the single writer)
// while the database file is written and synced — tens of milliseconds on a
// busy disk, every second or so under load. The writer's threshold is
// raised instead and a separate connection checkpoints in the background.
const writerDriver = "herald-sqlite3-writer"

var registerWriter sync.Once

// ErrLocked is returned (wrapped, with the holder's pid and the lock file's
// path) by Open when another Store holds the data directory.
var ErrLocked = errors.New("sqlite: data directory is in use by another herald process")

// Config configures Open.
type Config struct {
	// Path is the database file. A lock file Path+".lock" keeps a second
	// process out.
	Path string
	// Synchronous is the SQLite synchronous mode: "full" (default; every
	// commit is on disk before it is acknowledged, so an accepted event
	// survives power loss) or "normal" (in WAL mode, commits after the last
	// checkpoint may be lost on power loss — not on a process crash — for
	// several times the single-row commit rate).
	Synchronous string
	// Keys seals subscription secrets at rest (nil: stored as plain text;
	// see store/secrets.go).
	Keys *seal.Ring
	// NoLock skips the data directory lock, for a short maintenance
	// command (herald secrets rotate-key) run beside a serving herald:
	// SQLite's own file locking keeps the two writers apart, and the
	// command writes only a few hundred rows per transaction. Never for
	// a second server.
	NoLock bool
}

// Store is the SQLite implementation of store.Store.
type Store struct {
	// db is the single writer connection; every write transaction starts
	// with BEGIN IMMEDIATE, run by hand on the connection (txconn.go);
	// _txlock=immediate in its DSN makes any *sql.Tx on it do the same.
	db *sql.DB
	// rdb is the read pool (query_only connections).
	rdb     *sql.DB
	path    string
	release func() error
	// locked: this store holds the data directory lock (Config.NoLock was
	// not set), so no other process uses the database (store/liveness.go).
	locked bool

	// writeMu serializes write transactions (there is one writer
	// connection anyway) so the synchronous mode set before a transaction
	// is the one its commit uses. syncMode is the writer's current mode;
	// durableMode is the configured one.
	writeMu     sync.Mutex
	syncMode    string
	durableMode string

	// ckdb is the background checkpointer's connection; stopCheckpoint
	// ends checkpointLoop and checkpointDone says it ended.
	ckdb           *sql.DB
	stopCheckpoint chan struct{}
	checkpointDone chan struct{}

	// kinds caches which kinds of subscription exist (delivery.go), keyed
	// by the subscriptions version every subscription change bumps.
	kindsMu sync.Mutex
	kinds   subscriptionKinds

	// swept is where the retention sweep's scans of delivery_keys and
	// attempts stopped (store/retention.go).
	swept store.RetentionCursors

	// keys seals subscription secrets (Config.Keys).
	keys *seal.Ring
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database at cfg.Path and locks its data
// directory. It does not migrate; call Migrate.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("sqlite: Config.Path is required")
	}
	if strings.ContainsRune(cfg.Path, '?') {
		return nil, fmt.Errorf("sqlite: path must not contain '?': %s", cfg.Path)
	}
	syncMode := "FULL"
	switch strings.ToLower(cfg.Synchronous) {
	case "", "full":
	case "normal":
		syncMode = "NORMAL"
	default:
		return nil, fmt.Errorf("sqlite: Config.Synchronous must be \"full\" or \"normal\", not %q", cfg.Synchronous)
	}

	release := func() error { return nil }
	var err error
	if !cfg.NoLock {
		if release, err = lockFile(cfg.Path + ".lock"); err != nil {
			return nil, err
		}
	}
	s := &Store{path: cfg.Path, release: release, locked: !cfg.NoLock, syncMode: syncMode, durableMode: syncMode, keys: cfg.Keys}
	if err := privateFiles(cfg.Path); err != nil {
		_ = s.Close()
		return nil, err
	}

	// _stmt_cache_size keeps each connection's compiled statements for
	// reuse: the queue paths run the same few statements thousands of times
	// a second, and compiling them was a third of the time spent in SQLite
	// on some of them (pprof of herald serve).
	base := fmt.Sprintf("%s?_journal_mode=WAL&_busy_timeout=%d&_foreign_keys=on&_synchronous=%s&_stmt_cache_size=%d",
		cfg.Path, busyTimeout.Milliseconds(), syncMode, stmtCacheSize)
	writerDSN := fmt.Sprintf("%s&_txlock=immediate&_cache_size=-%d", base, writerCacheKiB)
	registerWriter.Do(func() {
		sql.Register(writerDriver, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
			_, err := c.Exec(fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", writerAutoCheckpoint), nil)
			return err
		}})
	})
	if s.db, err = sql.Open(writerDriver, writerDSN); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	s.db.SetMaxOpenConns(1)
	s.db.SetMaxIdleConns(1)
	s.db.SetConnMaxLifetime(0)
	s.db.SetConnMaxIdleTime(0)
	// The writer connection creates the file and switches it to WAL before
	// any reader opens it: a reader on a fresh file would otherwise race it.
	if err := s.db.PingContext(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, unavailable(err))
	}

	readerDSN := fmt.Sprintf("%s&_query_only=on&_cache_size=-%d", base, readerCacheKiB)
	if s.rdb, err = sql.Open("sqlite3", readerDSN); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	readConns := max(minReadConns, runtime.GOMAXPROCS(0))
	s.rdb.SetMaxOpenConns(readConns)
	s.rdb.SetMaxIdleConns(readConns)
	s.rdb.SetConnMaxIdleTime(0)

	if s.ckdb, err = sql.Open("sqlite3", base); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	s.ckdb.SetMaxOpenConns(1)
	s.ckdb.SetMaxIdleConns(1)
	s.ckdb.SetConnMaxIdleTime(0)
	s.stopCheckpoint, s.checkpointDone = make(chan struct{}), make(chan struct{})
	go s.checkpointLoop()
	return s, nil
}

// checkpointLoop copies committed WAL frames into the database file every
// checkpointEvery, on its own connection, so commits never wait for it. A
// PASSIVE checkpoint takes no lock writers or readers wait on: it copies
// what no reader still needs and stops; the writer then restarts the WAL
// from the beginning once everything was copied, which keeps the file
// small. Errors are not fatal (the writer's own threshold is the backstop);
// the next tick tries again.
func (s *Store) checkpointLoop() {
	defer close(s.checkpointDone)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stopCheckpoint:
			return
		case <-t.C:
			_, _ = s.ckdb.Exec("PRAGMA wal_checkpoint(PASSIVE)")
		}
	}
}

// Close releases the connections and the data directory lock.
func (s *Store) Close() error {
	var errs []error
	if s.stopCheckpoint != nil {
		close(s.stopCheckpoint)
		<-s.checkpointDone
		s.stopCheckpoint = nil
	}
	if s.ckdb != nil {
		errs = append(errs, s.ckdb.Close())
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	if s.release != nil {
		errs = append(errs, s.release())
		s.release = nil
	}
	return errors.Join(errs...)
}

// Ping checks that both the writer and a reader answer.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: ping: %w", unavailable(err))
	}
	var one int
	if err := s.rdb.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("sqlite: ping: %w", unavailable(err))
	}
	return nil
}

// unavailable marks errors that mean "the database cannot be used right
// now" (closed, busy past the timeout, I/O failure) as
// herald.ErrStoreUnavailable, keeping the cause.
func unavailable(err error) error {
	if err == nil {
		return nil
	}
	var se sqlite3.Error
	switch {
	case errors.Is(err, sql.ErrConnDone), errors.Is(err, context.DeadlineExceeded),
		strings.Contains(err.Error(), "database is closed"):
		return fmt.Errorf("%w: %w", herald.ErrStoreUnavailable, err)
	case errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked ||
		se.Code == sqlite3.ErrIoErr || se.Code == sqlite3.ErrCantOpen || se.Code == sqlite3.ErrFull ||
		se.Code == sqlite3.ErrReadonly):
		return fmt.Errorf("%w: %w", herald.ErrStoreUnavailable, err)
	}
	return err
}

// writeTx runs fn in one durable write transaction (BEGIN IMMEDIATE on the
// single writer connection) and commits it; any error rolls everything
// back, so a failed call changes nothing.
func (s *Store) writeTx(ctx context.Context, op string, fn func(tx queryer) error) error {
	return s.writeTxMode(ctx, op, true, fn)
}

// queueTx is writeTx for queue bookkeeping — claims, completions, releases,
// rescues, retention — whose commit need not reach the disk before it
// returns: it runs with synchronous=NORMAL. In WAL mode that keeps the
// database consistent through any crash; a power loss may roll back the
// last such commits, which only means a lease or an outcome is lost and the
// delivery is attempted again (herald is at-least-once by design). Because
// the WAL is append-only and replayed in order, the next durable commit
// (an ingest, under synchronous=FULL) makes every earlier queue commit
// durable too. Event ingest — what herald acknowledges — always keeps the
// configured mode.
func (s *Store) queueTx(ctx context.Context, op string, fn func(tx queryer) error) error {
	return s.writeTxMode(ctx, op, false, fn)
}

func (s *Store) writeTxMode(ctx context.Context, op string, durable bool, fn func(tx queryer) error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.writeTxLocked(ctx, op, durable, fn)
}

// readTx runs fn in one read transaction on the read pool, so everything fn
// reads comes from one snapshot.
func (s *Store) readTx(ctx context.Context, op string, fn func(tx queryer) error) error {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("sqlite: %s: begin: %w", op, unavailable(err))
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		if isDomainError(err) {
			return err
		}
		return fmt.Errorf("sqlite: %s: %w", op, unavailable(err))
	}
	return nil
}

func isDomainError(err error) bool {
	var he *herald.Error
	return errors.As(err, &he)
}

// Times are stored as INTEGER milliseconds since the epoch (UTC).

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

func fromNullMS(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMS(v.Int64)
	return &t
}

// padded is the row count a variable-length statement is padded to: the
// next power of two. A statement's text names its rows, and the driver's
// statement cache (_stmt_cache_size) keys on the text, so unpadded, every
// batch size was a new text, compiled again (6% of the node's CPU at full
// load, mostly sqlite3_prepare of multi-row INSERTs and IN lists). Padded,
// each statement has at most nine shapes up to 256 rows.
func padded(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// inList returns the placeholders and arguments of `IN (…)` over args,
// padded (see padded) by repeating the last argument, which matches
// nothing new. Callers pass chunks of a longer list (ids[lo:hi]): the
// chunk is clipped, so padding reallocates instead of writing over the ids
// that follow it in the shared array (issue 20: a retry of more than 250
// events failed on SQLite), and a chunk that needs no padding is used as
// it is.
func inList(args []any) (string, []any) {
	if len(args) == 0 {
		return "", args
	}
	n := padded(len(args))
	args = slices.Clip(args)
	for len(args) < n {
		args = append(args, args[len(args)-1])
	}
	return placeholders(n), args
}

// valuesRows writes the rows of a padded `SELECT * FROM (VALUES …) WHERE
// column1 IS NOT NULL` (see padded): row is one row's "(?,…)", and rows
// past n are padding whose arguments are all NULL (padArgs). It returns
// how many padding rows it wrote.
func valuesRows(q *strings.Builder, row string, n int) int {
	p := padded(n)
	for i := 0; i < p; i++ {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(row)
	}
	return p - n
}

// padArgs appends the NULL arguments of pad padding rows of cols columns.
// args must be the caller's own slice, not a chunk of a longer one (see
// inList).
func padArgs(args []any, pad, cols int) []any {
	for i := 0; i < pad*cols; i++ {
		args = append(args, nil)
	}
	return args
}

// placeholders returns "?,?,…" with n marks.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}

func anySlice[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}
