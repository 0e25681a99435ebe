package postgres

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Server-side TCP keepalives on the liveness session: the server frees the
// lock of a node whose host or network vanished (no FIN, no RST) once the
// socket was silent for livenessKeepaliveIdle and livenessKeepaliveCount
// probes livenessKeepaliveInterval apart went unanswered: at most
// 10 + 3×5 = 25 s. A process that dies on a live host (kill -9, a panic,
// the OOM killer) closes its socket and frees the lock at once. The node
// pings the session on every DeliveryRescueDead (every second from the
// engine), so the socket is never idle long while the node lives. Should
// the host vanish while the server is sending (a ping's answer), the
// keepalives do not apply but tcp_user_timeout does: data unacknowledged
// for 25 s ends the session too (PostgreSQL 12+).
const (
	livenessKeepaliveIdle     = 10 // seconds
	livenessKeepaliveInterval = 5  // seconds
	livenessKeepaliveCount    = 3
	livenessUserTimeoutMS     = 25_000
)

// livenessHoldWait bounds how long NodeLivenessHold waits for its lock: a
// node restarted with the same id may find it held for a moment by another
// node's DeliveryRescueDead rescuing the previous process's leases, or by
// the previous process's session while the server notices its end.
const livenessHoldWait = 5 * time.Second

// livenessSession is the dedicated connection that holds this node's
// liveness lock (a session lock cannot live on a pooled connection, see
// leaderSession).
type livenessSession struct {
	mu     sync.Mutex
	conn   *pgx.Conn
	nodeID string
}

// livenessKey is the SQL of a node's lock key, arg being the SQL of its id.
// The rule is store/liveness.go's. The key is the one-bigint advisory lock
// hashtextextended(schema || '/' || node id): keyed by schema like the
// leader's, so deployments and tests sharing a server stay apart, and in
// the one-bigint key space, apart from the (class, schema) locks of
// migrations and leadership.
func livenessKey(arg string) string {
	return `hashtextextended(current_schema() || '/' || ` + arg + `, 0)`
}

// NodeLivenessHold takes this node's liveness lock, registers the node, and
// rescues the leases a previous process of the same node left.
func (s *Store) NodeLivenessHold(ctx context.Context, params *store.NodeLivenessHoldParams) (int, error) {
	const op = "error holding node liveness"
	if params.NodeID == "" {
		return 0, errors.New("postgres: node liveness hold: NodeID is required")
	}
	if s.closed.Load() {
		return 0, unavailable(op, errors.New("store closed"))
	}
	l := &s.liveness
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		return 0, errors.New("postgres: node liveness hold: already held")
	}
	if err := s.livenessLockLocked(ctx, params.NodeID, params.Now); err != nil {
		return 0, err
	}
	// The lock is ours: any in_flight row under our id is a previous
	// process's.
	return s.rescue(ctx, op, "", "lease_owner = $2", "holder_owner = $2", ms(params.Now), params.NodeID)
}

// livenessLockLocked opens the session, takes the lock (waiting up to
// livenessHoldWait) and registers nodeID. l.mu is held.
func (s *Store) livenessLockLocked(ctx context.Context, nodeID string, now time.Time) error {
	const op = "error holding node liveness"
	l := &s.liveness
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return mapErr(op, err)
	}
	// SET rather than startup parameters, as for the leader's session: a
	// server or proxy that refuses them (a Unix socket has no keepalives)
	// still gives a session, kept alive by the pings alone.
	// One statement each: a refused one leaves the others set.
	for name, v := range map[string]int{
		"tcp_keepalives_idle":     livenessKeepaliveIdle,
		"tcp_keepalives_interval": livenessKeepaliveInterval,
		"tcp_keepalives_count":    livenessKeepaliveCount,
		"tcp_user_timeout":        livenessUserTimeoutMS,
	} {
		_, _ = conn.Exec(ctx, "SET "+name+" = "+strconv.Itoa(v))
	}
	deadline := time.Now().Add(livenessHoldWait)
	for {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+livenessKey("$1")+`)`, nodeID).Scan(&ok); err != nil {
			closeConn(conn)
			return mapErr(op, err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			closeConn(conn)
			return herald.Conflictf("node id %s is held by a live node", nodeID)
		}
		select {
		case <-ctx.Done():
			closeConn(conn)
			return mapErr(op, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Registered only once the lock is held: a registered node whose lock
	// is free is dead (store/liveness.go).
	if _, err := conn.Exec(ctx, `INSERT INTO herald_nodes (id, started_at) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET started_at = excluded.started_at`, nodeID, ms(now)); err != nil {
		closeConn(conn)
		return mapErr(op, err)
	}
	l.conn, l.nodeID = conn, nodeID
	return nil
}

// DeliveryRescueDead rescues the leases of registered nodes whose liveness
// lock is free, and unregisters them. Each try-lock is transaction-level:
// the statement holds a dead node's lock while it rescues and unregisters
// it, so a process of that node starting meanwhile waits for its lock
// (NodeLivenessHold) and registers afresh after. A live node's lock cannot
// be taken, by this statement or any other: its leases are never touched.
//
// Cost per call: a ping of this node's liveness session, and one statement
// that reads herald_nodes (a row per live node) with one try-lock per row;
// the in_flight rows are only read through deliveries_in_flight_idx when a
// node is dead.
func (s *Store) DeliveryRescueDead(ctx context.Context, params *store.DeliveryRescueDeadParams) (int, error) {
	self, err := s.livenessCheck(ctx, params.Now)
	if err != nil {
		return 0, err
	}
	return s.rescue(ctx, "error rescuing dead nodes' deliveries",
		`dead AS MATERIALIZED (SELECT id FROM herald_nodes
			WHERE id <> $2 AND pg_try_advisory_xact_lock(`+livenessKey("id")+`)),
		gone AS (DELETE FROM herald_nodes WHERE id IN (SELECT id FROM dead))`,
		"lease_owner IN (SELECT id FROM dead)", "holder_owner IN (SELECT id FROM dead)",
		ms(params.Now), self)
}

// livenessCheck pings this node's liveness session and, if it broke (the
// lock went with it), takes the lock again, so a node that lost its session
// for a moment is alive again (its leases may have been rescued by others
// meanwhile: their outcomes are then stale, as after an expiry). It returns
// the node id ("" when NodeLivenessHold was not called).
func (s *Store) livenessCheck(ctx context.Context, now time.Time) (string, error) {
	l := &s.liveness
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.nodeID == "" {
		return "", nil
	}
	if l.conn != nil && !l.conn.IsClosed() {
		if _, err := l.conn.Exec(ctx, "SELECT 1"); err == nil {
			return l.nodeID, nil
		}
	}
	if l.conn != nil {
		closeConn(l.conn)
		l.conn = nil
	}
	nodeID := l.nodeID
	if err := s.livenessLockLocked(ctx, nodeID, now); err != nil {
		return nodeID, err
	}
	return nodeID, nil
}

// close unregisters the node and ends the session on Store.Close. The lock
// is released explicitly first, as the leader's is (leaderSession.close).
func (l *livenessSession) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_, _ = l.conn.Exec(ctx, `DELETE FROM herald_nodes WHERE id = $1`, l.nodeID)
	_, _ = l.conn.Exec(ctx, `SELECT pg_advisory_unlock(`+livenessKey("$1")+`)`, l.nodeID)
	closeConn(l.conn)
	l.conn = nil
}

// closeConn closes a dedicated connection, bounded by closeTimeout.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	_ = conn.Close(ctx)
	cancel()
}
