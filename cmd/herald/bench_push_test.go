package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/bench"
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
