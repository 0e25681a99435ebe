package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/store/postgres"
)

// Names of the schemas this package creates (doc.go): herald_test_ for a
// test's own, herald_pool_ for the reused ones. Both go on with the
// creation time and a random part.
const (
	prefixTest = "herald_test_"
	prefixPool = "herald_pool_"
)

// staleTest is the age past which sweep drops a test's own schema: no
// test runs for an hour.
const staleTest = time.Hour

// poolLockClass is the first key of the advisory lock that marks a pooled
// schema as taken by a live process (the second is a hash of its name);
// the store's own locks use other classes.
const poolLockClass = 0x68726c74 // "hrlt"

// poolMaxGrowth is how much a pooled schema's files may have grown over
// its freshly migrated size and still be reused: past it a test left
// enough dead rows behind that the next one would not start from a small,
// fresh-looking schema.
const poolMaxGrowth = 1 << 20

// pool holds this process's migrated schemas between tests (doc.go).
var pool struct {
	mu sync.Mutex
	// conn holds the advisory lock of every schema the process has; when
	// the process ends so does the session, and the next sweep may drop
	// them.
	conn *pgx.Conn
	free []pooled
	seed *poolSeed // from the first freshly migrated schema
}

// pooled is one schema with what it looked like freshly migrated.
type pooled struct {
	name  string
	shape string // poolShape's fingerprint
	size  int64
	// lockedBy is the session holding its lock: if pool.conn was replaced
	// meanwhile, the lock is gone and the schema is dropped, not reused.
	lockedBy *pgx.Conn
}

// poolSeed is what a reset needs to know about the migrated schema.
type poolSeed struct {
	tables []string          // to empty, referencing tables first
	rows   map[string]string // the migrations' own rows, as table[] literals
}

// newName returns prefix, the time and a random part: unique among the
// processes sharing the server, and dated for sweep.
func newName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + strconv.FormatInt(time.Now().Unix(), 10) + "_" + hex.EncodeToString(b[:])
}

// poolSchema returns a migrated, empty schema for this test, taken from
// the pool or migrated now; on cleanup it is reset and returned to the
// pool, or dropped when the test changed more than its rows.
func poolSchema(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, p := poolTake(ctx, t)
	if p.name == "" {
		p.name, p.lockedBy = newName(prefixPool), conn
		if err := poolMigrate(ctx, conn, &p); err != nil {
			poolDrop(ctx, t, conn, p.name)
			t.Fatalf("pool schema: %v", err)
		}
	}
	t.Cleanup(func() { poolGive(t, p) })
	return p.name
}

// poolTake pops a free schema (name "" when none is free) and returns
// the process's connection, connecting (and sweeping) the first time.
func poolTake(ctx context.Context, t testing.TB) (*pgx.Conn, pooled) {
	t.Helper()
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if pool.conn == nil || pool.conn.IsClosed() {
		// A lost session lost the locks: the free schemas may be swept
		// by another process now, so they are forgotten.
		pool.conn, pool.free = adminConn(ctx, t), nil
		// It holds no lock yet, as sweep needs.
		sweep(ctx, t, pool.conn)
	}
	var p pooled
	if n := len(pool.free); n > 0 {
		p, pool.free = pool.free[n-1], pool.free[:n-1]
	}
	return pool.conn, p
}

// poolMigrate creates p's schema, locked, migrates it with the store's own
// Migrate and records its shape.
func poolMigrate(ctx context.Context, conn *pgx.Conn, p *pooled) error {
	pool.mu.Lock()
	_, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1, hashtext($2))", poolLockClass, p.name)
	if err == nil {
		_, err = conn.Exec(ctx, "CREATE SCHEMA "+p.name)
	}
	pool.mu.Unlock()
	if err != nil {
		return err
	}
	// Migrating on a pool of its own lets the other tests use conn.
	s, err := postgres.Open(ctx, postgres.Config{URL: URL(), Schema: p.name, MaxConns: 1})
	if err != nil {
		return err
	}
	err = s.Migrate(ctx)
	_ = s.Close()
	if err != nil {
		return err
	}
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if p.shape, p.size, err = poolShape(ctx, conn, p.name); err != nil {
		return err
	}
	if pool.seed == nil {
		pool.seed, err = poolSeedRead(ctx, conn, p.name)
	}
	return err
}

// poolGive resets p and puts it back in the pool, or drops it when it no
// longer looks freshly migrated (poolShape). A failure only costs the
// next test a migration.
func poolGive(t testing.TB, p pooled) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool.mu.Lock()
	defer pool.mu.Unlock()
	conn := pool.conn
	if conn == nil || conn.IsClosed() {
		return // its lock is gone with the session: the next sweep drops it
	}
	shape, size, err := poolShape(ctx, conn, p.name)
	switch {
	case err != nil:
	case p.lockedBy != conn:
		err = fmt.Errorf("its lock was lost with the session")
	case shape != p.shape || size > p.size+poolMaxGrowth:
		err = fmt.Errorf("changed by the test")
	}
	if err == nil {
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return poolReset(ctx, tx, p.name) })
	}
	if err == nil {
		pool.free = append(pool.free, p)
		return
	}
	poolDropLocked(ctx, t, conn, p.name)
}

// poolDrop drops a schema of the pool and releases its lock.
func poolDrop(ctx context.Context, t testing.TB, conn *pgx.Conn, name string) {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	poolDropLocked(ctx, t, conn, name)
}

// poolDropLocked is poolDrop with pool.mu held.
func poolDropLocked(ctx context.Context, t testing.TB, conn *pgx.Conn, name string) {
	ctx = context.WithoutCancel(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
		t.Logf("drop schema %s: %v", name, err)
	}
	_, _ = conn.Exec(ctx, "SELECT pg_advisory_unlock($1, hashtext($2))", poolLockClass, name)
}

// poolReset empties schema's tables, puts the migrations' own rows back
// and restarts its sequences: the state Migrate left.
func poolReset(ctx context.Context, tx pgx.Tx, schema string) error {
	for _, tbl := range pool.seed.tables {
		if _, err := tx.Exec(ctx, "DELETE FROM "+schema+"."+tbl); err != nil {
			return err
		}
	}
	for tbl, rows := range pool.seed.rows {
		q := fmt.Sprintf("INSERT INTO %[1]s.%[2]s OVERRIDING SYSTEM VALUE SELECT * FROM unnest($1::text::%[1]s.%[2]s[])", schema, tbl)
		if _, err := tx.Exec(ctx, q, rows); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, `SELECT setval(seqrelid, seqstart, false) FROM pg_sequence
		WHERE seqrelid IN (SELECT oid FROM pg_class WHERE relnamespace = $1::text::regnamespace)`, schema)
	return err
}

// poolSeedRead reads the tables of a freshly migrated schema, in an order
// that deletes referencing rows first, and the rows the migrations put in
// them.
func poolSeedRead(ctx context.Context, conn *pgx.Conn, schema string) (*poolSeed, error) {
	// Tables that hold rows themselves or through their partitions, each
	// with the tables whose foreign keys reference it.
	rows, err := conn.Query(ctx, `SELECT c.relname,
			coalesce((SELECT array_agg(DISTINCT r.relname) FROM pg_constraint f JOIN pg_class r ON r.oid = f.conrelid
				WHERE f.contype = 'f' AND f.confrelid = c.oid AND f.conrelid <> c.oid), '{}')
		FROM pg_class c
		WHERE c.relnamespace = $1::text::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		ORDER BY c.relname`, schema)
	if err != nil {
		return nil, err
	}
	refs := map[string][]string{}
	var names []string
	for rows.Next() {
		var name string
		var by []string
		if err := rows.Scan(&name, &by); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, name)
		refs[name] = by
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	seed := &poolSeed{rows: map[string]string{}}
	done := map[string]bool{}
	var visit func(string)
	visit = func(n string) { // referencing tables first
		if done[n] {
			return
		}
		done[n] = true
		for _, r := range refs[n] {
			visit(r)
		}
		seed.tables = append(seed.tables, n)
	}
	for _, n := range names {
		visit(n)
	}
	for _, n := range names {
		var lit *string
		if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT array_agg(t)::text FROM %s.%s t", schema, n)).Scan(&lit); err != nil {
			return nil, err
		}
		if lit != nil {
			seed.rows[n] = *lit
		}
	}
	return seed, nil
}

// poolShape fingerprints schema's definitions (relations, columns,
// defaults, indexes, constraints, triggers, functions) and sums its files'
// sizes. A test that changed a definition, left statistics behind
// (ANALYZE, which a reset would not undo) or grew it past poolMaxGrowth
// gets its schema dropped rather than reused.
func poolShape(ctx context.Context, conn *pgx.Conn, schema string) (shape string, size int64, err error) {
	var stats int64
	err = conn.QueryRow(ctx, `WITH rel AS (SELECT oid, relname, relkind FROM pg_class WHERE relnamespace = $1::text::regnamespace)
		SELECT md5(coalesce(string_agg(x, '|' ORDER BY x), '')),
			(SELECT coalesce(sum(pg_relation_size(oid)), 0)::bigint FROM rel WHERE relkind IN ('r', 'i', 't', 'S')),
			(SELECT count(*) FROM pg_stats WHERE schemaname = $1)
		FROM (
			SELECT 'r ' || r.relname || ' ' || r.relkind::text || ' ' || coalesce(string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
				|| ' ' || a.attnotnull::text || ' ' || a.attidentity::text || coalesce(' ' || pg_get_expr(d.adbin, d.adrelid), ''), ', ' ORDER BY a.attnum), '') AS x
			FROM rel r
			LEFT JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
			LEFT JOIN pg_attrdef d ON d.adrelid = r.oid AND d.adnum = a.attnum
			GROUP BY r.oid, r.relname, r.relkind
			UNION ALL SELECT 'i ' || pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN rel ON rel.oid = i.indrelid
			UNION ALL SELECT 'c ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace = $1::text::regnamespace
			UNION ALL SELECT 't ' || pg_get_triggerdef(tr.oid) || tr.tgenabled::text FROM pg_trigger tr JOIN rel ON rel.oid = tr.tgrelid WHERE NOT tr.tgisinternal
			UNION ALL SELECT 'f ' || p.oid::regprocedure::text || ' ' || md5(p.prosrc) FROM pg_proc p WHERE p.pronamespace = $1::text::regnamespace
		) defs`, schema).Scan(&shape, &size, &stats)
	if err == nil && stats > 0 {
		shape += " analyzed"
	}
	return shape, size, err
}

// swept is set once a process has swept.
var swept struct {
	sync.Mutex
	done bool
}

// sweep drops, once per process, what other runs left (doc.go): pooled
// schemas whose process is gone (their lock is free) and a test's own
// schemas older than staleTest. conn must hold no pool lock (a session
// takes its own locks again). A failure only leaves them for the next run.
func sweep(ctx context.Context, t testing.TB, conn *pgx.Conn) {
	t.Helper()
	swept.Lock()
	defer swept.Unlock()
	if swept.done {
		return
	}
	swept.done = true
	rows, err := conn.Query(ctx, "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1) OR starts_with(nspname, $2)", prefixTest, prefixPool)
	var names []string
	if err == nil {
		names, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Logf("sweep: %v", err)
		return
	}
	for _, n := range names {
		stamp, random, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(n, prefixTest), prefixPool), "_")
		sec, err := strconv.ParseInt(stamp, 10, 64)
		if err != nil || len(random) != 12 {
			continue // not named by newName (an older testdb's, maybe in use)
		}
		if strings.HasPrefix(n, prefixTest) {
			if time.Since(time.Unix(sec, 0)) > staleTest {
				_, err = conn.Exec(ctx, "DROP SCHEMA "+n+" CASCADE")
			}
		} else {
			var free bool
			if err = conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, hashtext($2))", poolLockClass, n).Scan(&free); err == nil && free {
				_, err = conn.Exec(ctx, "DROP SCHEMA "+n+" CASCADE")
				_, _ = conn.Exec(ctx, "SELECT pg_advisory_unlock($1, hashtext($2))", poolLockClass, n)
			}
		}
		if err != nil {
			t.Logf("sweep %s: %v", n, err)
		}
	}
}

// PoolDrop drops this process's pooled schemas; a TestMain calls it after
// the tests (elsewhere the next process's sweep drops them).
func PoolDrop() {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if pool.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range pool.free {
		_, _ = pool.conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+p.name+" CASCADE")
	}
	_ = pool.conn.Close(ctx)
	pool.conn, pool.free = nil, nil
}

// Main is a test package's TestMain body: it runs the tests, drops the
// schemas this process pooled (PoolDrop) and exits with the tests' code.
//
//	func TestMain(m *testing.M) { testdb.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	PoolDrop()
	os.Exit(code)
}
