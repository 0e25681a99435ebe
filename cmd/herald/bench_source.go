package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/heraldhq/herald/bench"
)

// runBenchSource runs `herald bench --source TYPE`.
func runBenchSource(ctx context.Context, f *benchFlags, stdout, stderr io.Writer) error {
	switch {
	case !slices.Contains(bench.SourceTypes, f.source):
		return fmt.Errorf("--source must be one of %s", strings.Join(bench.SourceTypes, ", "))
	case f.count < 1 || f.count > 1_000_000:
		return errors.New("--source: --count must be 1..1,000,000")
	case f.latencyCount < 0 || f.latencyCount > 1_000_000:
		return errors.New("--latency-count must be 0..1,000,000")
	case f.prefetch < 0 || f.prefetch > 10000:
		return errors.New("--prefetch must be 0..10000")
	case f.payload < 0 || f.payload > benchMaxPayload:
		return fmt.Errorf("--payload must be 0..%d", benchMaxPayload)
	case f.rate < 0:
		return errors.New("--rate must not be negative")
	case f.target != "" && f.token == "":
		return errors.New("--target needs --token")
	}
	if f.brokerURL != "" {
		if err := bench.CheckBrokerURL(f.source, f.brokerURL); err != nil {
			return err
		}
	}
	if f.target != "" {
		if err := bench.CheckLoopback(f.target); err != nil {
			return err
		}
	}
	rate := f.rate
	if rate == 0 {
		rate = 1000
	}
	cfg := bench.SourceConfig{Type: f.source, BrokerURL: f.brokerURL, Count: f.count, Payload: f.payload,
		Prefetch: f.prefetch, Rate: rate, LatencyCount: f.latencyCount, Wait: f.wait}
	if f.progress {
		cfg.Progress = stderr
	}
	start := func(ctx context.Context) (bench.Node, func(), error) {
		if f.target != "" {
			return bench.Node{URL: f.target, Token: f.token, Remote: true}, func() {}, nil
		}
		n, cleanup, err := f.startInProcess(ctx, stderr)
		if err != nil {
			return bench.Node{}, nil, err
		}
		return bench.Node{URL: n.URL(), Token: n.cfg.APIToken}, cleanup, nil
	}
	res, err := bench.RunSource(ctx, cfg, start)
	if err != nil {
		return err
	}
	res.Target = f.target
	if f.target == "" {
		res.Target = "in-process sqlite"
		if f.databaseURL != "" {
			res.Target = "in-process postgres"
		}
	}
	if err := writeBenchResult(stdout, f.jsonOut, res, func(w io.Writer) { bench.WriteSourceReport(w, res) }); err != nil || f.jsonOut {
		return err // the JSON carries the herald phase's error
	}
	if res.Herald.Error != "" {
		return fmt.Errorf("herald phase: %s", res.Herald.Error)
	}
	return nil
}
