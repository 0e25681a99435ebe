package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/bench"
	"github.com/heraldhq/herald/internal/testbroker"
	"github.com/heraldhq/herald/internal/testdb"
)

// runBenchJSON runs herald bench with --json and decodes its output.
func runBenchJSON(t *testing.T, args ...string) bench.Result {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runBench(t.Context(), append([]string{"--json", "--progress=false"}, args...), &out, &errOut)
	require.NoError(t, err, "stderr:\n%s", errOut.String())
	var res bench.Result
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), "output:\n%s", out.String())
	// Every field the JSON promises is present (decoding into a map
	// catches a renamed tag that the struct decode would hide).
	var fields map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &fields))
	for _, k := range []string{
		"target", "mode", "concurrency", "fanout", "payload_bytes", "published", "publish_errors",
		"events_per_second", "publish_call_p50_ms", "publish_call_p99_ms", "deliveries_expected",
		"delivered", "dead", "deliveries_per_second", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms",
		"complete", "ceiling", "ceiling_ratio", "destination",
	} {
		require.Contains(t, fields, k)
	}
	if b, ok := fields["broker"].(map[string]any); ok {
		for _, k := range []string{"type", "broker_url", "raw", "herald_per_second", "ratio", "publish_to_broker_p50_ms",
			"publish_to_broker_p99_ms", "cpu_us_per_delivery", "duplicates", "invalid"} {
			require.Contains(t, b, k)
		}
		for _, k := range []string{"concurrency", "messages", "seconds", "per_second", "p50_ms", "p99_ms", "cpu_us_per_message"} {
			require.Contains(t, b["raw"], k)
		}
	}
	return res
}

// requireSane checks what any successful run must satisfy, whatever the
// machine's speed: no timing thresholds.
func requireSane(t *testing.T, res bench.Result, events, fanout int64) {
	t.Helper()
	require.Equal(t, events, res.Published)
	require.Zero(t, res.PublishErrors)
	require.Equal(t, events*fanout, res.DeliveriesWanted)
	require.True(t, res.Complete, "%+v", res)
	// Dead letters are possible only when the receiver fails on purpose
	// (and then only after five failures in a row).
	require.GreaterOrEqual(t, res.Delivered+res.Dead, res.DeliveriesWanted, "%+v", res)
	require.Positive(t, res.EventsPerSecond)
	require.Positive(t, res.DeliveriesPerSec)
	require.Positive(t, res.LatencyP50Ms)
	require.LessOrEqual(t, res.LatencyP50Ms, res.LatencyP95Ms)
	require.LessOrEqual(t, res.LatencyP95Ms, res.LatencyP99Ms)
	require.Positive(t, res.PublishCallP50Ms)
	require.LessOrEqual(t, res.PublishCallP50Ms, res.PublishCallP99Ms)
	require.Positive(t, res.Ceiling.Requests)
	require.Positive(t, res.Ceiling.PerSecond)
	require.Positive(t, res.CeilingRatio)
	require.Positive(t, res.CPUPerDeliveryUs, "CPU per delivery from the node's process_cpu_seconds_total")
	require.Equal(t, "process", res.CPUScope, "in-process runs say the figure includes publishers and receiver")
}

func TestBenchSQLite(t *testing.T) {
	t.Parallel()

	t.Run("Single", func(t *testing.T) {
		t.Parallel()
		res := runBenchJSON(t, "--count", "200", "--concurrency", "8", "--ceiling-time", "2s")
		require.Equal(t, "in-process sqlite", res.Target)
		require.Equal(t, "single", res.Mode)
		requireSane(t, res, 200, 1)
	})

	t.Run("BatchFanout", func(t *testing.T) {
		t.Parallel()
		res := runBenchJSON(t, "--count", "200", "--batch", "50", "--fanout", "2", "--concurrency", "2",
			"--sqlite-synchronous", "normal", "--ceiling-time", "2s")
		require.Equal(t, "batch", res.Mode)
		require.Equal(t, 50, res.Batch)
		requireSane(t, res, 200, 2)
	})

	t.Run("FailuresAreRetried", func(t *testing.T) {
		t.Parallel()
		// Every 4th request fails; tiers are 0s,100ms,… so the retries
		// land within the run and every delivery still arrives.
		res := runBenchJSON(t, "--count", "100", "--concurrency", "4", "--fail-ratio", "0.25", "--ceiling-time", "1s")
		requireSane(t, res, 100, 1)
		require.Positive(t, res.FailedAttempts)
	})

	t.Run("Backlog", func(t *testing.T) {
		t.Parallel()
		// 300 events to an endpoint that always fails, retried every
		// 100 ms: the measured subscription's deliveries all arrive, the
		// failing endpoint is hit during the run, and none of its requests
		// count as the measured subscription's.
		res := runBenchJSON(t, "--count", "200", "--concurrency", "4", "--backlog", "300",
			"--tiers", "0s,100ms,100ms", "--ceiling-time", "1s")
		requireSane(t, res, 200, 1)
		require.EqualValues(t, 300, res.Backlog)
		require.Positive(t, res.BacklogAttempts)
		require.Zero(t, res.FailedAttempts)
		require.Zero(t, res.Dead, "the backlog's dead letters are not the measured subscription's")
	})

	t.Run("DirectDispatchCounted", func(t *testing.T) {
		t.Parallel()
		// A paced run keeps tier 0 drained: most deliveries skip the claim.
		// Off, none do.
		on := runBenchJSON(t, "--count", "100", "--rate", "200", "--concurrency", "4", "--ceiling-time", "1s")
		requireSane(t, on, 100, 1)
		require.Positive(t, on.DirectDispatched)
		off := runBenchJSON(t, "--count", "100", "--rate", "200", "--concurrency", "4", "--ceiling-time", "1s",
			"--direct-dispatch=false")
		requireSane(t, off, 100, 1)
		require.Zero(t, off.DirectDispatched)
		require.Positive(t, off.ClaimTxs)
	})

	t.Run("Samples", func(t *testing.T) {
		t.Parallel()
		res := runBenchJSON(t, "--duration", "2s", "--rate", "100", "--concurrency", "4", "--sample", "1s",
			"--ceiling-time", "1s")
		require.NotEmpty(t, res.Samples)
		for i, sm := range res.Samples {
			require.Positive(t, sm.AtS)
			require.Positive(t, sm.PublishedPerS, "sample %d", i)
			require.Positive(t, sm.HeapMB)
			require.Positive(t, sm.RSSMB)
			if i > 0 {
				require.Greater(t, sm.AtS, res.Samples[i-1].AtS)
			}
		}
	})

	t.Run("Bursts", func(t *testing.T) {
		t.Parallel()
		// Two bursts beside a paced load: every burst delivery arrives,
		// on its own subscription (the measured load's counts are its
		// own), and the windows are summed up.
		res := runBenchJSON(t, "--duration", "3s", "--rate", "100", "--concurrency", "4", "--sample", "1s",
			"--burst", "300", "--burst-every", "1s", "--ceiling-time", "1s")
		require.NotNil(t, res.Bursts)
		require.GreaterOrEqual(t, res.Bursts.Bursts, int64(2))
		require.Equal(t, res.Bursts.Bursts*300, res.Bursts.Published)
		require.Zero(t, res.Bursts.PublishErrors)
		require.Equal(t, res.Bursts.Published, res.Bursts.DeliveriesExpected)
		require.Equal(t, res.Bursts.DeliveriesExpected, res.Bursts.Delivered)
		require.Equal(t, res.Published, res.DeliveriesWanted, "burst deliveries are not the measured load's")
		require.NotNil(t, res.Windows)
		require.Positive(t, res.Windows.Windows)
		require.GreaterOrEqual(t, res.Windows.WorstMs, res.Windows.MedianMs)
	})

	t.Run("Drain", func(t *testing.T) {
		t.Parallel()
		res := runBenchJSON(t, "--count", "200", "--drain", "--ceiling-time", "1s")
		require.True(t, res.Drain)
		requireSane(t, res, 200, 1)
	})
}

func TestBenchRefusesNonLoopback(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--target", "http://192.0.2.1:8080", "--token", "x"},
		{"--target", "http://example.com", "--token", "x"},
		{"--database-url", "postgres://db.example.com/herald"},
		{"--target", "http://127.0.0.1:8080"}, // no token
		{"--count", "0"},
		{"--duration", "61m"},
		{"--burst", "10", "--burst-every", "500ms"},
		{"--burst", "-1"},
		{"--target", "http://127.0.0.1:1", "--token", "x", "--drain"},
	} {
		var out, errOut bytes.Buffer
		require.Error(t, runBench(t.Context(), args, &out, &errOut), "args %v", args)
		require.Empty(t, out.String())
	}
}

func TestBenchPostgres(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, testdb.URL())
	if err != nil {
		t.Skipf("SKIP: PostgreSQL not reachable at %s (set HERALD_TEST_DATABASE_URL): %v", testdb.URL(), err)
	}
	defer conn.Close(ctx)
	benchSchemas := func() []string {
		rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'herald_bench_%'`)
		require.NoError(t, err)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return names
	}
	before := benchSchemas()

	res := runBenchJSON(t, "--database-url", testdb.URL(), "--count", "200", "--concurrency", "8", "--ceiling-time", "1s")
	require.Equal(t, "in-process postgres", res.Target)
	requireSane(t, res, 200, 1)
	require.Positive(t, res.DBCPUPerDeliveryUs, "PostgreSQL's CPU per delivery, from /proc")
	// The run's schema is dropped afterwards (others' runs may come and go
	// meanwhile, so compare as sets: nothing new is left behind).
	require.Subset(t, before, benchSchemas())

	// --phases on PostgreSQL: each phase says what the database did.
	phases := runPhasesJSON(t, "--database-url", testdb.URL())
	for _, r := range phases.Runs {
		for _, p := range r.Phases {
			require.NotNil(t, p.DB, "phase %s", p.Name)
			require.Positive(t, p.DB.Samples, "phase %s: the watch sampled pg_stat_activity", p.Name)
		}
	}
	require.Subset(t, before, benchSchemas())
}

// A --target that does not answer exits 3, as every command does when it
// cannot connect (README, "Exit codes").
func TestBenchCannotConnect(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	err := runBench(t.Context(), []string{"--target", "http://127.0.0.1:1", "--token", "x", "--progress=false"}, &out, &errOut)
	require.ErrorContains(t, err, "error creating the bench subscription: cannot connect to http://127.0.0.1:1")
	require.Equal(t, exitConnect, exitCode(err))
	require.Empty(t, out.String())
}

// herald bench --destination: end to end against the machine's brokers,
// the raw phase and the herald phase each complete and the JSON holds the
// broker figures, consistent with each other (correctness, not speed).
func TestBenchDestinations(t *testing.T) {
	t.Parallel()
	for _, k := range []testbroker.Kind{testbroker.Redis, testbroker.NATS} {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			u := testbroker.URL(t, k)
			res := runBenchJSON(t, "--destination", string(k), "--broker-url", u, "--count", "200",
				"--concurrency", "8", "--ceiling-time", "1s")
			requireSaneDestination(t, res, string(k), 200)
		})
	}
	t.Run("webpush", func(t *testing.T) {
		t.Parallel()
		res := runBenchJSON(t, "--destination", "webpush", "--count", "100", "--concurrency", "4", "--ceiling-time", "1s")
		requireSaneDestination(t, res, "webpush", 100)
	})
}

// requireSaneDestination checks a --destination run: every event delivered
// once to the broker, the raw phase measured, the ratio and CPU figures
// derived from the run's own numbers.
func requireSaneDestination(t *testing.T, res bench.Result, typ string, events int64) {
	t.Helper()
	require.Equal(t, typ, res.Destination)
	require.NotNil(t, res.Broker, "the broker figures")
	d := res.Broker
	require.Equal(t, typ, d.Type)
	require.Equal(t, events, res.Published)
	require.Equal(t, events, res.DeliveriesWanted)
	require.Equal(t, events, res.Delivered, "every delivery arrived at the consumer: %+v", d)
	require.True(t, res.Complete)
	require.Zero(t, d.Duplicates)
	require.Zero(t, d.Invalid, "every message carried its stamp (webpush: decrypted)")
	require.Positive(t, d.Raw.Messages)
	require.Empty(t, d.Raw.Error)
	require.Positive(t, d.Raw.PerSecond)
	require.Positive(t, d.Raw.CPUPerMessageUs)
	require.Equal(t, res.DeliveriesPerSec, d.HeraldPerSecond)
	require.Positive(t, d.Ratio)
	require.InDelta(t, d.HeraldPerSecond/d.Raw.PerSecond, d.Ratio, 1e-9)
	require.Positive(t, d.PublishToBrokerP50Ms)
	require.LessOrEqual(t, d.PublishToBrokerP50Ms, d.PublishToBrokerP99Ms)
	require.Equal(t, res.LatencyP99Ms, d.PublishToBrokerP99Ms)
	require.Positive(t, d.CPUPerDeliveryUs)
	require.InDelta(t, d.CPUPerDeliveryUs-d.Raw.CPUPerMessageUs, d.ExtraCPUPerDeliveryUs, 1e-6)
	require.Zero(t, res.Ceiling.Requests, "the raw phase replaces the HTTP ceiling")
}

func TestBenchDestinationFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--destination", "kafka"},
		{"--destination", "redis", "--broker-url", "redis://192.0.2.1:6379/0"},
		{"--destination", "redis", "--broker-url", "nats://127.0.0.1:4222"},
		{"--destination", "webpush", "--broker-url", "redis://127.0.0.1:6379/0"},
		{"--broker-url", "redis://127.0.0.1:6379/0"},
		{"--destination", "amqp", "--fail-ratio", "0.1"},
		{"--destination", "mqtt", "--backlog", "10"},
	} {
		var out, errOut bytes.Buffer
		require.Error(t, runBench(t.Context(), args, &out, &errOut), "args %v", args)
		require.Empty(t, out.String())
	}
}

// runPhasesJSON runs --phases 2 with small phases and checks what every
// run must satisfy.
func runPhasesJSON(t *testing.T, args ...string) bench.PhasesResult {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runBench(t.Context(), append([]string{"--json", "--progress=false", "--phases", "2",
		"--phase-counts", "300,400,100"}, args...), &out, &errOut)
	require.NoError(t, err, "stderr:\n%s", errOut.String())
	var res bench.PhasesResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), "output:\n%s", out.String())
	require.Len(t, res.Runs, 2)
	for i, r := range res.Runs {
		require.Equal(t, i+1, r.Run)
		require.Len(t, r.Phases, 3)
		for j, name := range []string{"single", "batch", "rate"} {
			p := r.Phases[j]
			require.Equal(t, name, p.Name)
			require.Equal(t, []int64{300, 400, 100}[j], p.Published)
			require.Equal(t, p.Published, p.Delivered, "phase %s", name)
			require.Zero(t, p.Lost)
			require.Positive(t, p.DeliveriesPerSec)
			require.LessOrEqual(t, p.LatencyP50Ms, p.LatencyP99Ms)
		}
	}
	require.Len(t, res.Summary, 3)
	require.Equal(t, "rate", res.Summary[2].Name)
	require.Positive(t, res.Summary[2].P99GoalMs)
	return res
}

// TestBenchPhases: --phases runs the three phases on one node per run and
// reports each (PostgreSQL: TestBenchPostgres, which checks the schemas
// bench leaves behind and must not run beside another PostgreSQL bench).
func TestBenchPhases(t *testing.T) {
	t.Parallel()
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		res := runPhasesJSON(t)
		require.Nil(t, res.Runs[0].Phases[0].DB, "SQLite has no database to observe")
	})
	t.Run("Flags", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"--phases", "101"},
			{"--phases", "1", "--phase-counts", "1,2"},
			{"--phases", "1", "--phase-counts", "0,0,0"},
			{"--phases", "1", "--phase-counts", "a,1,1"},
			{"--observe-database", "postgres://127.0.0.1/x"}, // no --target
			{"--phases", "1", "--target", "http://127.0.0.1:1", "--token", "x", "--observe-database", "postgres://db.example.com/x"},
		} {
			var out, errOut bytes.Buffer
			require.Error(t, runBench(t.Context(), args, &out, &errOut), "args %v", args)
			require.Empty(t, out.String())
		}
	})
}

// TestBenchIdle: --idle measures a node with no traffic.
func TestBenchIdle(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	require.NoError(t, runBench(t.Context(), []string{"--json", "--idle", "1s"}, &out, &errOut), "stderr:\n%s", errOut.String())
	var res bench.IdleNodeResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), "output:\n%s", out.String())
	require.Equal(t, "in-process sqlite", res.Target)
	require.GreaterOrEqual(t, res.Seconds, 1.0)
	require.GreaterOrEqual(t, res.NodeCorePct, 0.0)
	require.Equal(t, "process", res.NodeScope)
	require.False(t, res.DBMeasured)
	for _, bad := range []string{"500ms", "61m"} {
		out.Reset()
		require.Error(t, runBench(t.Context(), []string{"--idle", bad}, &out, &errOut))
		require.Empty(t, out.String())
	}
}

// TestBenchSteady: --steady runs 200/s, 1,000/s and saturated on one
// in-process node and reports each phase's CPU against the saturated one.
func TestBenchSteady(t *testing.T) {
	t.Parallel()
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		var out, errOut bytes.Buffer
		require.NoError(t, runBench(t.Context(), []string{"--json", "--steady", "--steady-counts", "20,50,200"}, &out, &errOut), "stderr:\n%s", errOut.String())
		var res bench.SteadyResult
		require.NoError(t, json.Unmarshal(out.Bytes(), &res), "output:\n%s", out.String())
		require.Equal(t, "in-process sqlite (synchronous=full)", res.Target)
		require.Equal(t, "process", res.CPUScope)
		require.Len(t, res.Rows, 3)
		for i, want := range []struct {
			name  string
			count int64
		}{{"200/s", 20}, {"1,000/s", 50}, {"saturated", 200}} {
			r := res.Rows[i]
			require.Equal(t, want.name, r.Name)
			require.Equal(t, want.count, r.Published)
			require.Equal(t, want.count, r.Delivered)
			require.Zero(t, r.Lost)
			require.Positive(t, r.CPUPerDeliveryUs, "%s: CPU per delivery", r.Name)
			require.InDelta(t, r.CPUPerDeliveryUs/res.Rows[2].CPUPerDeliveryUs, r.NodeRatio, 1e-9)
			require.Zero(t, r.DBCPUPerDeliveryUs, "SQLite has no PostgreSQL")
		}
		require.InDelta(t, 1.0, res.Rows[2].NodeRatio, 1e-9)
		require.Less(t, res.Rows[0].DeliveriesPerSec, 300.0, "the first phase is paced at 200/s")
	})
	t.Run("Flags", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"--steady", "--steady-counts", "1,2"},
			{"--steady", "--steady-counts", "0,10,10"},
			{"--steady", "--steady-counts", "10,x,10"},
			{"--steady", "--phases", "1"},
			{"--steady", "--idle", "1s"},
			{"--steady", "--floor"}, // --floor compares with a --target node
			{"--floor", "--target", "http://127.0.0.1:1", "--token", "x"},
			// The relay's own flags, refused before it starts anything.
			{"relay"},
			{"relay", "--to", "http://192.0.2.1:8080"},
			{"relay", "--to", "ftp://127.0.0.1:1"},
			{"relay", "--to", "http://127.0.0.1:1", "--database-url", "postgres://db.example.com/herald"},
		} {
			var out, errOut bytes.Buffer
			require.Error(t, runBench(t.Context(), args, &out, &errOut), "args %v", args)
			require.Empty(t, out.String())
		}
	})
}

// TestBenchSteadyFloor runs --floor's relay as the bench does, a built
// herald's `bench relay` in a process of its own, on SQLite and on
// PostgreSQL: every phase's publishes arrive and the relay's CPU (and
// PostgreSQL's) is measured from outside; the relay's schema is gone
// afterwards.
func TestBenchSteadyFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := heraldBinary(t)
	old := relayExecutable
	relayExecutable = func() (string, error) { return bin, nil }
	t.Cleanup(func() { relayExecutable = old })
	for _, tc := range []struct{ name, db string }{{"SQLite", ""}, {"PostgreSQL", testdb.URL()}} {
		t.Run(tc.name, func(t *testing.T) {
			var conn *pgx.Conn
			if tc.db != "" {
				var err error
				conn, err = pgx.Connect(t.Context(), tc.db)
				if err != nil {
					if os.Getenv("CI") == "true" {
						t.Fatalf("PostgreSQL: %v", err)
					}
					t.Skipf("SKIP: PostgreSQL not reachable at %s: %v", tc.db, err)
				}
				defer conn.Close(context.Background())
			}
			f := &benchFlags{target: "http://127.0.0.1:1", observeDB: tc.db, payload: 256}
			var res bench.SteadyResult
			var errOut syncBuffer // the relay's stderr and the bench's, written at once
			require.NoError(t, f.runFloor(t.Context(), &res, [3]int64{200, 500, 1000}, nil, &errOut), errOut.String())
			m := regexp.MustCompile(`the floor's relay is pid (\d+) on http://127\.0\.0\.1:\d+`).FindStringSubmatch(errOut.String())
			require.NotNil(t, m, "stderr: %q", errOut.String())
			pid, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			_, err = os.Stat(fmt.Sprintf("/proc/%d", pid))
			require.ErrorIs(t, err, os.ErrNotExist, "the relay ended")
			require.Len(t, res.Floor, 3)
			for i, want := range []int64{200, 500, 1000} {
				r := res.Floor[i]
				require.Equal(t, want, r.Published, r.Name)
				require.Equal(t, want, r.Delivered, r.Name)
			}
			require.Positive(t, res.Floor[0].CPUPerDeliveryUs, "the relay's CPU, read from /proc")
			if tc.db != "" {
				require.Equal(t, "PostgreSQL", res.FloorStore)
				require.Positive(t, res.Floor[0].DBCPUPerDeliveryUs)
				var n int
				require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, bench.RelaySchema(pid)).Scan(&n))
				require.Zero(t, n, "the relay dropped its schema")
			} else {
				require.Equal(t, "SQLite (WAL, synchronous=FULL)", res.FloorStore)
				require.Zero(t, res.Floor[0].DBCPUPerDeliveryUs)
			}
		})
	}
}
