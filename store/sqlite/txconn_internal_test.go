package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

func openInternal(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{Path: filepath.Join(t.TempDir(), "h.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.writeTx(context.Background(), "create", func(tx queryer) error {
		_, err := tx.ExecContext(context.Background(), "CREATE TABLE probe (x INTEGER)")
		return err
	}))
	return s
}

func probeCount(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	require.NoError(t, s.db.QueryRowContext(context.Background(), "SELECT count(*) FROM probe").Scan(&n))
	return n
}

func insertProbe(ctx context.Context, tx queryer) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO probe VALUES (1)")
	return err
}

// A write transaction begun by hand on the writer connection (txConn) ends
// the way *sql.Tx did: an error or an ended context changes nothing, and
// the connection is left with no transaction open for the next one.
func TestWriteTxEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openInternal(t)
	refused := errors.New("refused")

	err := s.writeTx(ctx, "fails", func(tx queryer) error {
		if err := insertProbe(ctx, tx); err != nil {
			return err
		}
		return refused
	})
	require.ErrorIs(t, err, refused)
	require.Zero(t, probeCount(t, s), "rolled back")

	ended, cancel := context.WithCancel(ctx)
	cancel()
	err = s.writeTx(ended, "ended before", func(tx queryer) error { return insertProbe(ended, tx) })
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, probeCount(t, s))

	ending, cancel := context.WithCancel(ctx)
	err = s.queueTx(ending, "ends inside", func(tx queryer) error {
		if err := insertProbe(ending, tx); err != nil {
			return err
		}
		cancel()
		return nil
	})
	require.ErrorIs(t, err, context.Canceled, "not committed once the caller's context ended")
	require.Zero(t, probeCount(t, s))

	// A statement error inside: the transaction is rolled back, not left open.
	err = s.writeTx(ctx, "bad statement", func(tx queryer) error {
		if err := insertProbe(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO missing VALUES (1)")
		return err
	})
	require.Error(t, err)
	require.Zero(t, probeCount(t, s))

	// The transaction is already gone when writeTx rolls back, so its
	// ROLLBACK fails: the connection is closed, and the next one opens in
	// the configured mode and is set to NORMAL for queue bookkeeping.
	err = s.queueTx(ctx, "ends itself", func(tx queryer) error {
		if _, err := tx.ExecContext(ctx, "COMMIT"); err != nil {
			return err
		}
		return refused
	})
	require.ErrorIs(t, err, refused)
	var mode int
	require.NoError(t, s.queueTx(ctx, "mode", func(tx queryer) error {
		return tx.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&mode)
	}))
	require.Equal(t, 1, mode)

	require.NoError(t, s.writeTx(ctx, "commits", func(tx queryer) error { return insertProbe(ctx, tx) }), "no transaction left open")
	require.NoError(t, s.queueTx(ctx, "commits", func(tx queryer) error { return insertProbe(ctx, tx) }))
	require.Equal(t, 2, probeCount(t, s))
}

// The reason for txConn: rows open inside a write transaction start no
// goroutine each, even under a context that can end (a *sql.Tx starts one
// per query, and the driver one per statement; docs/benchmarks.md, issue
// 26). Not parallel: it counts the process's goroutines.
func TestWriteTxStartsNoGoroutines(t *testing.T) {
	s := openInternal(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const open = 20
	require.NoError(t, s.writeTx(ctx, "rows", func(tx queryer) error {
		before := runtime.NumGoroutine()
		var rows []*sql.Rows
		defer func() {
			for _, r := range rows {
				_ = r.Close()
			}
		}()
		for range open {
			if err := insertProbe(ctx, tx); err != nil {
				return err
			}
			r, err := tx.QueryContext(ctx, "SELECT x FROM probe")
			if err != nil {
				return err
			}
			rows = append(rows, r)
		}
		require.Less(t, runtime.NumGoroutine()-before, open/4)
		return nil
	}))
	require.Equal(t, open, probeCount(t, s))
}
