package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// FloorConfig is a floor run: the steady-rate phases sent through a Relay
// running in a process of its own.
type FloorConfig struct {
	// URL is the relay's base URL, Receiver the endpoint it sends to.
	URL      string
	Receiver *Receiver
	// PID is the relay's process, whose CPU (/proc, 10-ms ticks) is
	// measured.
	PID int
	// PostgresCPU also measures this machine's PostgreSQL processes (a
	// relay on PostgreSQL).
	PostgresCPU bool
}

// FloorRow is one phase of a floor run.
type FloorRow struct {
	Name             string  `json:"name"`
	Published        int64   `json:"published"`
	Delivered        int64   `json:"delivered"`
	DeliveriesPerSec float64 `json:"deliveries_per_second"`
	LatencyP50Ms     float64 `json:"latency_p50_ms"`
	LatencyP99Ms     float64 `json:"latency_p99_ms"`
	// CPUPerDeliveryUs is the relay process's; DBCPUPerDeliveryUs
	// PostgreSQL's (postgresCPU), when measured.
	CPUPerDeliveryUs   float64 `json:"cpu_us_per_delivery"`
	DBCPUPerDeliveryUs float64 `json:"db_cpu_us_per_delivery,omitempty"`
	// Ratio is CPUPerDeliveryUs over the last (saturated) phase's.
	Ratio float64 `json:"cpu_ratio_to_saturated"`
}

// RunFloor sends each phase's single publishes (Rate, Count, Concurrency
// and Payload; the other fields do not apply) through the relay and
// measures its CPU per delivery, as RunPhases does for a node. A phase
// ends when the receiver has every body the relay accepted, or a minute
// after the last publish.
func RunFloor(ctx context.Context, phases []Phase, cfg FloorConfig, progress io.Writer) ([]FloorRow, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: 1024, Proxy: nil}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	pid := strconv.Itoa(cfg.PID)
	var rows []FloorRow
	for _, ph := range phases {
		row, err := runFloorPhase(ctx, client, cfg, pid, ph)
		if err != nil {
			return rows, err
		}
		if progress != nil {
			fmt.Fprintf(progress, "floor %s: %d delivered, %.0f µs per delivery\n", ph.Name, row.Delivered, row.CPUPerDeliveryUs)
		}
		rows = append(rows, row)
	}
	if n := len(rows); n > 0 && rows[n-1].CPUPerDeliveryUs > 0 {
		for i := range rows {
			rows[i].Ratio = rows[i].CPUPerDeliveryUs / rows[n-1].CPUPerDeliveryUs
		}
	}
	return rows, ctx.Err()
}

func runFloorPhase(ctx context.Context, client *http.Client, cfg FloorConfig, pid string, ph Phase) (FloorRow, error) {
	row := FloorRow{Name: ph.Name}
	recv := cfg.Receiver
	pad := Pad(ph.Payload)
	delivered0, mark := recv.Delivered(), recv.Latency().Mark()
	cpu0, db0 := cpuSeconds(pid), 0.0
	if cfg.PostgresCPU {
		db0 = postgresCPU()
	}
	var (
		next, accepted atomic.Int64
		firstErr       atomic.Value
		wg             sync.WaitGroup
	)
	start := time.Now()
	for range max(ph.Concurrency, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= ph.Count {
					return
				}
				stamp, ok := awaitSchedule(ctx, start, i, ph.Rate)
				if !ok {
					return
				}
				if err := floorPublish(ctx, client, cfg.URL, EventBody("floor", stamp, pad)); err != nil {
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				accepted.Add(1)
			}
		}()
	}
	wg.Wait()
	row.Published = accepted.Load()
	deadline := time.Now().Add(time.Minute)
	for recv.Delivered()-delivered0 < row.Published && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	row.Delivered = recv.Delivered() - delivered0
	if row.Delivered > 0 {
		row.CPUPerDeliveryUs = (cpuSeconds(pid) - cpu0) * 1e6 / float64(row.Delivered)
		if cfg.PostgresCPU {
			row.DBCPUPerDeliveryUs = (postgresCPU() - db0) * 1e6 / float64(row.Delivered)
		}
		if last := recv.LastDelivered(); last.After(start) {
			row.DeliveriesPerSec = float64(row.Delivered) / last.Sub(start).Seconds()
		}
	}
	q := recv.Latency().QuantilesSince(mark, 0.5, 0.99)
	row.LatencyP50Ms, row.LatencyP99Ms = q[0], q[1]
	if msg, ok := firstErr.Load().(string); ok && ctx.Err() == nil {
		return row, fmt.Errorf("floor %s: the relay refused a publish: %s", ph.Name, msg)
	}
	if row.Delivered < row.Published && ctx.Err() == nil {
		return row, fmt.Errorf("floor %s: %d of %d accepted bodies did not arrive within a minute", ph.Name, row.Published-row.Delivered, row.Published)
	}
	return row, nil
}

func floorPublish(ctx context.Context, client *http.Client, base string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/publish", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return errors.New(resp.Status)
	}
	return nil
}
