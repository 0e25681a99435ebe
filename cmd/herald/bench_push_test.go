package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/bench"
	"github.com/heraldhq/herald/internal/testdb"
)

// TestBenchPush keeps `herald bench push` working: every scenario, tiny.
func TestBenchPush(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := heraldBinary(t)
	var out, errOut bytes.Buffer
	err := runBench(t.Context(), []string{"push", "--herald-binary", bin, "--idle-conns", "50", "--sources", "2",
		"--user-agents", "4", "--rate", "200", "--duration", "500ms", "--drain", "25", "--ceiling-time", "200ms", "--json"}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	var res bench.PushResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	require.Equal(t, 50, res.Idle.Open, "every idle connection still open")
	require.Positive(t, res.Rate.Sent)
	require.Zero(t, res.Rate.Errors)
	require.Equal(t, res.Rate.Sent, res.Rate.Received, "each 201 came after the user agent's ack")
	require.Positive(t, res.Max.PerSecond)
	require.NotNil(t, res.Max.Ceiling)
	require.Equal(t, 25, res.Drain.Received)
}

// TestBenchPushCluster runs `herald bench push --nodes 2` small: two nodes
// on one fresh PostgreSQL database, a few hundred user agents in two client
// processes, messages through random nodes, then kill -9 of one node: its
// user agents reconnect to the other with their uaid and every message
// answered 201 arrives; the database is dropped afterwards.
func TestBenchPushCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if os.Getenv("HERALD_TEST_DATABASE_URL") == "" && os.Getenv("CI") != "true" {
		t.Skip("SKIP: the cluster bench needs PostgreSQL: set HERALD_TEST_DATABASE_URL")
	}
	bin := heraldBinary(t)
	var out, errOut bytes.Buffer
	err := runBench(t.Context(), []string{"push", "--herald-binary", bin, "--scenarios", "", "--nodes", "2",
		"--database-url", testdb.URL(), "--cluster-uas", "300", "--sources", "2", "--rate", "200", "--duration", "1s",
		"--cluster-jitter", "500ms", "--cluster-settle", "30s", "--json"}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	var res bench.PushResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	c := res.Cluster
	require.NotNil(t, c, out.String())
	require.EqualValues(t, 300, c.Connections, errOut.String())
	require.Positive(t, c.Sent)
	require.Zero(t, c.Errors)
	require.Greater(t, c.HandedOff, 0.2, "about half the messages go through the other node")
	require.Positive(t, c.P99Ms)
	require.False(t, c.Replacement, "the survivor holds 300 user agents")
	require.EqualValues(t, 150, c.Displaced)
	require.Equal(t, c.Displaced, c.Reconnected, "every user agent of the killed node reconnected")
	require.Zero(t, c.LostUAID, "each kept its uaid")
	require.Positive(t, c.KillSent)
	require.Positive(t, c.Stored, "messages for the displaced user agents were stored while they were away")
	require.Zero(t, c.Lost, "every message answered 201 arrived: %s", errOut.String())
	require.Len(t, c.NodeRSSMB, 2)
	require.Positive(t, c.NodeRSSMB[0])
	require.Positive(t, c.SettleSeconds)

	conn, err := pgx.Connect(t.Context(), testdb.URL())
	require.NoError(t, err)
	defer conn.Close(t.Context())
	var left int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_database WHERE datname = $1`,
		fmt.Sprintf("herald_bench_%d", os.Getpid())).Scan(&left))
	require.Zero(t, left, "the run's database is dropped")
}
