package bench_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/bench"
)

func TestSteadyPhases(t *testing.T) {
	ph := bench.SteadyPhases([3]int64{30, 100, 200}, 512)
	require.Len(t, ph, 3)
	require.Equal(t, []string{"200/s", "1,000/s", "saturated"}, []string{ph[0].Name, ph[1].Name, ph[2].Name}, "low rates first")
	require.InDelta(t, 200, ph[0].Rate, 0)
	require.InDelta(t, 1000, ph[1].Rate, 0)
	require.Zero(t, ph[2].Rate, "as fast as possible")
	for i, want := range []int64{30, 100, 200} {
		require.Equal(t, want, ph[i].Count)
		require.Equal(t, 512, ph[i].Payload)
		require.Equal(t, 64, ph[i].Concurrency)
		require.Zero(t, ph[i].Batch, "single publishes")
	}
}

func TestNewSteadyResult(t *testing.T) {
	res := bench.NewSteadyResult("http://127.0.0.1:1", "node", []bench.PhaseResult{
		{Name: "200/s", CPUPerDeliveryUs: 600, DBCPUPerDeliveryUs: 500, DeliveriesPerSec: 200},
		{Name: "1,000/s", CPUPerDeliveryUs: 300, DeliveriesPerSec: 1000},
		{Name: "saturated", CPUPerDeliveryUs: 150, DBCPUPerDeliveryUs: 100, DeliveriesPerSec: 5000},
	})
	require.Len(t, res.Rows, 3)
	require.InDelta(t, 4.0, res.Rows[0].NodeRatio, 1e-9)
	require.InDelta(t, 5.0, res.Rows[0].DBRatio, 1e-9)
	require.InDelta(t, 2.0, res.Rows[1].NodeRatio, 1e-9)
	require.Zero(t, res.Rows[1].DBRatio, "no PostgreSQL figure, no ratio")
	require.InDelta(t, 1.0, res.Rows[2].NodeRatio, 1e-9)

	var out bytes.Buffer
	bench.WriteSteadyReport(&out, res)
	require.Contains(t, out.String(), "herald bench --steady against http://127.0.0.1:1 (CPU: node)")
	require.Regexp(t, `200/s\s+200\s+.*600\s+4\.0\s+500\s+0\s+≤ 3× saturated, PostgreSQL ≤ 600 µs`, out.String())
	require.Regexp(t, `1,000/s\s+1000\s+.*300\s+2\.0\s+-\s+0\s+≤ 2× saturated, PostgreSQL ≤ 300 µs`, out.String())

	// A saturated phase without a CPU figure leaves the ratios out.
	none := bench.NewSteadyResult("x", "process", []bench.PhaseResult{{Name: "200/s", CPUPerDeliveryUs: 600}, {Name: "saturated"}})
	require.Zero(t, none.Rows[0].NodeRatio)
}

// TestWriteSteadyReportFloor: with a floor, the report prints it as a
// second table, each phase's herald figure less the floor's.
func TestWriteSteadyReportFloor(t *testing.T) {
	res := bench.NewSteadyResult("http://127.0.0.1:1", "node", []bench.PhaseResult{
		{Name: "200/s", CPUPerDeliveryUs: 600, DBCPUPerDeliveryUs: 700, DeliveriesPerSec: 200},
		{Name: "1,000/s", CPUPerDeliveryUs: 300, DeliveriesPerSec: 1000},
		{Name: "saturated", CPUPerDeliveryUs: 150, DBCPUPerDeliveryUs: 100, DeliveriesPerSec: 5000},
	})
	var out bytes.Buffer
	bench.WriteSteadyReport(&out, res)
	require.NotContains(t, out.String(), "the floor", "no floor, no second table")

	res.FloorStore = "PostgreSQL"
	res.Floor = []bench.FloorRow{
		{Name: "200/s", DeliveriesPerSec: 200, LatencyP99Ms: 4, CPUPerDeliveryUs: 250, DBCPUPerDeliveryUs: 280, Ratio: 5},
		{Name: "1,000/s", DeliveriesPerSec: 1000, LatencyP99Ms: 2, CPUPerDeliveryUs: 150, Ratio: 3},
		{Name: "saturated", DeliveriesPerSec: 12000, LatencyP99Ms: 12, CPUPerDeliveryUs: 50, DBCPUPerDeliveryUs: 15, Ratio: 1},
	}
	out.Reset()
	bench.WriteSteadyReport(&out, res)
	require.Contains(t, out.String(), "the floor, a bare relay on PostgreSQL: HTTP in, one insert, 202, HTTP out")
	require.Regexp(t, `200/s\s+200\s+4\.0\s+250\s+5\.0\s+280\s+\+350 \(PostgreSQL \+420\)`, out.String())
	require.Regexp(t, `1,000/s\s+1000\s+2\.0\s+150\s+3\.0\s+-\s+\+150\s`, out.String())
	require.Regexp(t, `saturated\s+12000\s+12\.0\s+50\s+1\.0\s+15\s+\+100 \(PostgreSQL \+85\)`, out.String())
}
