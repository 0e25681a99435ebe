package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/heraldhq/herald/client"
)

// IdleNodeResult is what a node with no traffic costs over a span.
type IdleNodeResult struct {
	Target  string  `json:"target"`
	Seconds float64 `json:"seconds"`
	// NodeCorePct is the node's CPU as a percentage of one core: its
	// process_cpu_seconds_total (NodeScope "node"), or this process's
	// when the node runs in it ("process": nothing else runs meanwhile).
	NodeCorePct float64 `json:"node_core_pct"`
	NodeScope   string  `json:"node_scope"`
	// DBCorePct is this machine's PostgreSQL processes' CPU as a
	// percentage of one core, when DBMeasured.
	DBMeasured bool    `json:"db_measured"`
	DBCorePct  float64 `json:"db_core_pct"`
}

// MeasureIdleNode sends nothing to node for d and reports the CPU it and, with
// postgres, this machine's PostgreSQL used meanwhile.
func MeasureIdleNode(ctx context.Context, node Node, d time.Duration, postgres bool) (*IdleNodeResult, error) {
	api := client.New(node.URL, node.Token)
	api.HTTP = &http.Client{Timeout: 10 * time.Second}
	defer api.HTTP.CloseIdleConnections()
	res := &IdleNodeResult{NodeScope: "process", DBMeasured: postgres}
	nodeCPU := processCPU
	if node.Remote {
		res.NodeScope = "node"
		nodeCPU = func() float64 { return nodeCounters(ctx, api).cpuSeconds }
		if nodeCPU() == 0 {
			return nil, fmt.Errorf("%s: no process_cpu_seconds_total on /metrics (is /metrics reachable with this token?)", node.URL)
		}
	}
	n0, d0, t0 := nodeCPU(), postgresCPU(), time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d):
	}
	n1, d1 := nodeCPU(), postgresCPU()
	res.Seconds = time.Since(t0).Seconds()
	res.NodeCorePct = 100 * (n1 - n0) / res.Seconds
	if postgres {
		res.DBCorePct = 100 * (d1 - d0) / res.Seconds
	}
	return res, nil
}
