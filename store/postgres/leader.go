package postgres

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// leaderLockClass is the first key of the leader's session advisory lock;
// the second is a hash of the schema, as for migrations, so every schema
// (every herald deployment, every test) has its own leader.
const leaderLockClass = migrateLockClass + 1

// leaderIdleTimeout is how long the leader's session may stay silent before
// the server ends it (and frees the lock). LeaderAttempt must be called
// more often than this; maintenance calls it every 5 s.
const leaderIdleTimeout = 30 * time.Second

// leaderSession is the dedicated connection that holds the leader lock. A
// session lock cannot live on a pooled connection: the pool would hand the
// connection (and the lock) to other work, and a transaction-level lock ends
// with its transaction.
type leaderSession struct {
	mu   sync.Mutex
	conn *pgx.Conn
	held bool
}

// LeaderAttempt takes the leader lock if nobody holds it, or confirms that
// this store still does (its session is alive).
func (s *Store) LeaderAttempt(ctx context.Context) (bool, error) {
	const op = "error attempting leadership"
	if s.closed.Load() {
		return false, unavailable(op, errors.New("store closed"))
	}
	l := &s.leader
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil && l.conn.IsClosed() {
		l.conn, l.held = nil, false
	}
	if l.conn == nil {
		conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
		if err != nil {
			return false, mapErr(op, err)
		}
		// If this node vanishes without closing its connection (a host
		// crash, a partition), the server would keep the session, and the
		// lock, until TCP keepalive gives up: possibly hours. Callers
		// confirm leadership every few seconds, so a session idle for
		// leaderIdleTimeout has been abandoned; the server ends it and
		// another node takes over. (PostgreSQL 14+; older servers ignore
		// it and rely on keepalives.)
		_, _ = conn.Exec(ctx, "SET idle_session_timeout = "+strconv.FormatInt(leaderIdleTimeout.Milliseconds(), 10))
		l.conn = conn
	}
	if l.held {
		// The lock lives as long as the session: check that it answers.
		if _, err := l.conn.Exec(ctx, "SELECT 1"); err != nil {
			l.dropLocked()
			return false, mapErr(op, err)
		}
		return true, nil
	}
	// pg_try_advisory_lock counts re-entries, so it is only called when the
	// lock is not held (one LeaderRelease then always frees it).
	var ok bool
	if err := l.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, hashtext(current_schema()))",
		leaderLockClass).Scan(&ok); err != nil {
		l.dropLocked()
		return false, mapErr(op, err)
	}
	l.held = ok
	return ok, nil
}

// LeaderRelease unlocks the leader lock if this store holds it.
func (s *Store) LeaderRelease(ctx context.Context) error {
	l := &s.leader
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held || l.conn == nil {
		return nil
	}
	_, err := l.conn.Exec(ctx, "SELECT pg_advisory_unlock($1, hashtext(current_schema()))", leaderLockClass)
	l.held = false
	if err != nil {
		// Ending the session frees the lock for certain.
		l.dropLocked()
		return mapErr("error releasing leadership", err)
	}
	return nil
}

// dropLocked closes the session (freeing any lock it held). l.mu is held.
func (l *leaderSession) dropLocked() {
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		_ = l.conn.Close(ctx)
		cancel()
	}
	l.conn, l.held = nil, false
}

// close ends the session on Store.Close. The lock is released explicitly
// first: the server frees a closed session's locks only once its backend
// has exited, a moment after the connection closes, and another node should
// be able to take over at once.
func (l *leaderSession) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held && l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		_, _ = l.conn.Exec(ctx, "SELECT pg_advisory_unlock($1, hashtext(current_schema()))", leaderLockClass)
		cancel()
	}
	l.dropLocked()
}
