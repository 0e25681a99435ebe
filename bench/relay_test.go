package bench

import (
	"bytes"
	"context"
	"database/sql"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
)

// floorTestPhases are SteadyPhases, small: 100 at 200/s, 300 at 1,000/s,
// 600 as fast as possible.
func floorTestPhases() []Phase {
	return SteadyPhases([3]int64{100, 300, 600}, 256)
}

// serveRelay runs a relay on cfg (To set here) until the test ends, and
// returns its URL, its receiver and a stop that waits for Serve to return
// (the store closed, a PostgreSQL schema dropped).
func serveRelay(t *testing.T, cfg RelayConfig) (string, *Receiver, func()) {
	t.Helper()
	recv, err := NewReceiver(ReceiverConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = recv.Close() })
	cfg.To = recv.URL()
	ctx, cancel := context.WithCancel(t.Context())
	r, err := NewRelay(ctx, cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx, ln) }()
	var once bool
	stop := func() {
		if once {
			return
		}
		once = true
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("the relay did not stop")
		}
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), recv, stop
}

// TestRelayFloorSQLite sends the steady phases through a SQLite relay:
// every publish is answered 202 and arrives, each phase reports this
// process's CPU, the ratios are to the saturated phase, and every body
// acknowledged is in the relay's table once Serve has ended.
func TestRelayFloorSQLite(t *testing.T) {
	dir := t.TempDir()
	url, recv, stop := serveRelay(t, RelayConfig{Dir: dir})
	rows, err := RunFloor(t.Context(), floorTestPhases(), FloorConfig{URL: url, Receiver: recv, PID: os.Getpid()}, nil)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	var total int64
	for i, want := range []int64{100, 300, 600} {
		r := rows[i]
		require.Equal(t, want, r.Published, r.Name)
		require.Equal(t, want, r.Delivered, r.Name)
		require.Positive(t, r.LatencyP99Ms, r.Name)
		total += r.Delivered
	}
	require.Positive(t, rows[0].CPUPerDeliveryUs, "a second at 200/s uses some CPU")
	if rows[2].CPUPerDeliveryUs > 0 {
		require.InDelta(t, 1, rows[2].Ratio, 1e-9)
		require.InDelta(t, rows[0].CPUPerDeliveryUs/rows[2].CPUPerDeliveryUs, rows[0].Ratio, 1e-9)
	}
	stop()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "relay.db"))
	require.NoError(t, err)
	defer db.Close()
	var n int64
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM relay_events`).Scan(&n))
	require.Equal(t, total, n, "the relay stores what it acknowledges")
}

// TestRelayRefusesBadPublishes: an oversized body is refused (400) and
// stored nowhere; a relay whose store fails answers 503, and RunFloor
// reports the refusal instead of a figure.
func TestRelayRefusesBadPublishes(t *testing.T) {
	dir := t.TempDir()
	url, recv, _ := serveRelay(t, RelayConfig{Dir: dir})
	resp, err := http.Post(url+"/publish", "application/json", bytes.NewReader(make([]byte, relayMaxBody+1)))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Zero(t, recv.Delivered())

	// The table gone under the relay: every insert fails.
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "relay.db")+"?_busy_timeout=5000")
	require.NoError(t, err)
	_, err = db.Exec(`DROP TABLE relay_events`)
	require.NoError(t, err)
	db.Close()
	_, err = RunFloor(t.Context(), SteadyPhases([3]int64{1, 1, 1}, 16), FloorConfig{URL: url, Receiver: recv, PID: os.Getpid()}, nil)
	require.ErrorContains(t, err, "the relay refused a publish: 503")
	require.Zero(t, recv.Delivered())
}

// TestRelayFloorPostgres is TestRelayFloorSQLite on PostgreSQL: the relay
// measures PostgreSQL's CPU too, and drops its schema when Serve ends.
func TestRelayFloorPostgres(t *testing.T) {
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, testdb.URL())
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL: %v", err)
		}
		t.Skipf("SKIP: no PostgreSQL at HERALD_TEST_DATABASE_URL: %v", err)
	}
	defer conn.Close(context.Background())
	schemas := func() map[string]bool {
		rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'herald\_relay\_%'`)
		require.NoError(t, err)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		out := map[string]bool{}
		for _, n := range names {
			out[n] = true
		}
		return out
	}
	before := schemas()
	url, recv, stop := serveRelay(t, RelayConfig{DatabaseURL: testdb.URL()})
	var mine string
	for n := range schemas() {
		if !before[n] {
			mine = n
		}
	}
	require.NotEmpty(t, mine, "the relay made a schema of its own")
	rows, err := RunFloor(ctx, floorTestPhases(), FloorConfig{URL: url, Receiver: recv, PID: os.Getpid(), PostgresCPU: true}, nil)
	require.NoError(t, err)
	var total int64
	for i, want := range []int64{100, 300, 600} {
		require.Equal(t, want, rows[i].Delivered, rows[i].Name)
		total += rows[i].Delivered
	}
	require.Positive(t, rows[0].DBCPUPerDeliveryUs, "PostgreSQL's backend did the inserts")
	var n int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{mine, "relay_events"}.Sanitize()).Scan(&n))
	require.Equal(t, total, n, "the relay stores what it acknowledges")
	stop()
	require.False(t, schemas()[mine], "the relay drops its schema")
}
