package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
)

// queryer is what a transaction's statements run on: *sql.Tx (reads),
// txConn (writes) and *sql.DB.
type queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// txConn is a write transaction on the writer connection, begun and ended
// by hand (BEGIN IMMEDIATE … COMMIT) rather than through *sql.Tx; its
// statements run under a context that cannot end (ADR 0041).
//
// Why: every *sql.Tx starts a goroutine that waits for its context, every
// query in it another (database/sql, Rows.initContextClose), and the
// driver one more for each statement run under a context that can end
// (mattn/go-sqlite3, SQLiteStmt.exec). One ingest commit started about
// nine goroutines, each waking an idle P's thread when it started and
// again when it ended: at 200 deliveries/s most of a SQLite node's
// context switches (docs/benchmarks.md, issue 26). On a connection, with
// a context that cannot end, database/sql and the driver start none.
//
// What is given up: a statement already running is not interrupted when
// the caller's context ends. writeTx checks the context before BEGIN and
// before COMMIT, so a call whose context ended still changes nothing, and
// every write transaction is short (the queue paths work in chunks of at
// most 250 rows) and runs under the busy timeout. Read transactions
// (readTx) stay on *sql.Tx: a read can be long and its caller gone, and
// interrupting it is worth its goroutines.
type txConn struct{ c *sql.Conn }

func (t txConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.c.ExecContext(context.WithoutCancel(ctx), query, args...)
}

func (t txConn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.c.QueryContext(context.WithoutCancel(ctx), query, args...)
}

func (t txConn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.c.QueryRowContext(context.WithoutCancel(ctx), query, args...)
}

func (t txConn) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return t.c.PrepareContext(context.WithoutCancel(ctx), query)
}

// writeTxLocked is writeTxMode with writeMu held: fn runs in one BEGIN
// IMMEDIATE transaction on the writer connection, under the synchronous
// mode durable says (see queueTx).
func (s *Store) writeTxLocked(ctx context.Context, op string, durable bool, fn func(tx queryer) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: %s: begin: %w", op, unavailable(err))
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: %s: begin: %w", op, unavailable(err))
	}
	// A transaction left open (its ROLLBACK failed) would make the next
	// BEGIN fail: the connection is then closed instead of reused, and
	// the next one opens in the configured mode (the DSN's _synchronous).
	open := false
	defer func() {
		if open {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			s.syncMode = s.durableMode
		}
		_ = conn.Close()
	}()
	tx := txConn{conn}
	bg := context.Background()
	mode := s.durableMode
	if !durable {
		mode = "NORMAL"
	}
	if mode != s.syncMode {
		if _, err := tx.ExecContext(bg, "PRAGMA synchronous = "+mode); err != nil {
			return fmt.Errorf("sqlite: %s: set synchronous: %w", op, unavailable(err))
		}
		s.syncMode = mode
	}
	if _, err := tx.ExecContext(bg, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("sqlite: %s: begin: %w", op, unavailable(err))
	}
	open = true
	rollback := func() {
		if _, err := tx.ExecContext(bg, "ROLLBACK"); err == nil {
			open = false
		}
	}
	if err := fn(tx); err != nil {
		rollback()
		if isDomainError(err) {
			return err
		}
		return fmt.Errorf("sqlite: %s: %w", op, unavailable(err))
	}
	if err := ctx.Err(); err != nil {
		rollback()
		return fmt.Errorf("sqlite: %s: commit: %w", op, unavailable(err))
	}
	if _, err := tx.ExecContext(bg, "COMMIT"); err != nil {
		rollback()
		return fmt.Errorf("sqlite: %s: commit: %w", op, unavailable(err))
	}
	open = false
	return nil
}
