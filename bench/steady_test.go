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
