package store_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// TestSweepCursor: each scan examines at most RetentionScanRows rows, the
// next resumes where it stopped, and the end starts over.
func TestSweepCursor(t *testing.T) {
	t.Parallel()
	// 25,000 attempt rows, one per delivery id; every 1,000th is an orphan.
	const rows = 25_000
	ids := make([]string, rows)
	for i := range ids {
		ids[i] = fmt.Sprintf("d%06d", i)
	}
	orphan := map[string]bool{}
	for i := 0; i < rows; i += 1000 {
		orphan[ids[i]] = true
	}
	var afters []string
	fail := false
	step := func(_ context.Context, afterKey []string, batch int) ([]string, int, int, error) {
		after := ""
		if afterKey != nil {
			require.Len(t, afterKey, 1)
			after = afterKey[0]
		}
		afters = append(afters, after)
		if fail {
			return nil, 0, 0, errors.New("boom")
		}
		start := sort.SearchStrings(ids, after)
		if start < len(ids) && ids[start] == after {
			start++
		}
		end := min(start+batch, len(ids))
		deleted := 0
		for _, id := range ids[start:end] {
			if orphan[id] {
				deleted++
				delete(orphan, id)
			}
		}
		var last []string
		if end > start {
			last = []string{ids[end-1]}
		}
		return last, end - start, deleted, nil
	}

	var c store.SweepCursor
	n, err := c.Scan(t.Context(), 1000, step)
	require.NoError(t, err)
	require.Equal(t, 10, n, "rows 0–9,999")
	require.Len(t, afters, 10)
	require.Equal(t, "", afters[0])
	require.Equal(t, ids[8999], afters[9])

	afters = nil
	n, err = c.Scan(t.Context(), 1000, step)
	require.NoError(t, err)
	require.Equal(t, 10, n, "rows 10,000–19,999")
	require.Equal(t, ids[9999], afters[0], "resumed where the first scan stopped")

	// The end: 5,000 rows, then a short step, and the cursor starts over.
	afters = nil
	n, err = c.Scan(t.Context(), 1000, step)
	require.NoError(t, err)
	require.Equal(t, 5, n)
	require.Len(t, afters, 6, "five full steps and the empty one at the end")
	afters = nil
	n, err = c.Scan(t.Context(), 3000, step)
	require.NoError(t, err)
	require.Zero(t, n, "every orphan is gone")
	require.Equal(t, "", afters[0], "started over")
	require.Len(t, afters, 4, "steps of 3,000 capped at 10,000 rows: 3,000+3,000+3,000+1,000")

	// A failing step stops the scan; the next one retries from there.
	afters, fail = nil, true
	_, err = c.Scan(t.Context(), 1000, step)
	require.Error(t, err)
	fail = false
	_, err = c.Scan(t.Context(), 1000, step)
	require.NoError(t, err)
	require.Equal(t, afters[0], afters[1])
	require.Equal(t, ids[9999], afters[0])
}

func TestRetentionCutoffs(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := &store.RetentionSweepParams{Delivered: time.Hour, Dead: 2 * time.Hour, Events: 3 * time.Hour, Now: now}
	require.Equal(t, store.RetentionCutoffs{
		Delivered: now.Add(-time.Hour), Dead: now.Add(-2 * time.Hour), Events: now.Add(-3 * time.Hour),
		Keys: now.Add(-3 * time.Hour), Subscriptions: now.Add(-time.Hour), Secrets: now.Add(-time.Hour),
	}, p.Cutoffs())
	// Zero or less keeps the class, and what follows it.
	p = &store.RetentionSweepParams{Delivered: -time.Hour, Events: 0, Dead: time.Hour, Now: now}
	require.Equal(t, store.RetentionCutoffs{Dead: now.Add(-time.Hour)}, p.Cutoffs())
}

// fakeSweeper is a store.RetentionBackend that records the steps it is
// asked to run and deletes from counts of due rows per step.
type fakeSweeper struct {
	cursors store.RetentionCursors
	due     map[string]int // rows each delete step still has
	fail    string         // the step that fails
	calls   []string
}

func (f *fakeSweeper) RetentionCursors() *store.RetentionCursors { return &f.cursors }

func (f *fakeSweeper) step(name string, limit int) (int, error) {
	f.calls = append(f.calls, name)
	if name == f.fail {
		return 0, errors.New(name + " failed")
	}
	n := min(f.due[name], limit)
	f.due[name] -= n
	return n, nil
}

func (f *fakeSweeper) RetentionDeliveryDelete(_ context.Context, p *store.RetentionDeliveryDeleteParams) (int, error) {
	name := "deliveries"
	if len(p.States) == 1 && p.States[0] == herald.DeliveryDead {
		name = "dead"
	}
	return f.step(name, p.Limit)
}

func (f *fakeSweeper) RetentionEventDelete(_ context.Context, p *store.RetentionEventDeleteParams) (int, error) {
	return f.step("events", p.Limit)
}

func (f *fakeSweeper) RetentionSecretDelete(_ context.Context, p *store.RetentionSecretDeleteParams) (int, error) {
	return f.step("secrets", p.Limit)
}

func (f *fakeSweeper) RetentionSubscriptionDelete(_ context.Context, p *store.RetentionSubscriptionDeleteParams) (int, error) {
	return f.step("subscriptions", p.Limit)
}

func (f *fakeSweeper) RetentionKeyScan(_ context.Context, p *store.RetentionKeyScanParams) (*store.RetentionScanResult, error) {
	n, err := f.step("keys", p.Limit)
	return &store.RetentionScanResult{Last: []string{"s", "k"}, Examined: n, Deleted: n}, err
}

func (f *fakeSweeper) RetentionAttemptScan(_ context.Context, p *store.RetentionAttemptScanParams) (*store.RetentionScanResult, error) {
	n, err := f.step("attempts", p.Limit)
	return &store.RetentionScanResult{Last: []string{"d"}, Examined: n, Deleted: n}, err
}

// TestRetentionRun: the steps run in their order, each delete step until a
// batch comes back short, a class whose retention is zero is skipped (key
// rows and attempts never are), and the first error stops the sweep with
// what was deleted counted.
func TestRetentionRun(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	params := &store.RetentionSweepParams{Delivered: time.Hour, Dead: time.Hour, Events: time.Hour, BatchSize: 10, Now: now}
	due := func() map[string]int {
		return map[string]int{"deliveries": 25, "dead": 10, "events": 3, "keys": 4, "secrets": 0, "subscriptions": 1, "attempts": 2}
	}

	f := &fakeSweeper{due: due()}
	res, err := store.RetentionRun(t.Context(), f, params)
	require.NoError(t, err)
	require.Equal(t, &store.RetentionSweepResult{Deliveries: 25, Dead: 10, Events: 3, Keys: 4, Subscriptions: 1, Attempts: 2}, res)
	require.Equal(t, []string{
		"deliveries", "deliveries", "deliveries", // 10, 10, 5
		"dead", "dead", // 10, then 0: a full batch asks again
		"events", "keys", "secrets", "subscriptions", "attempts",
	}, f.calls)

	// Events retention zero: no event step; key rows are still scanned
	// (a deleted subscription's go whatever the retention).
	f = &fakeSweeper{due: due()}
	_, err = store.RetentionRun(t.Context(), f, &store.RetentionSweepParams{Delivered: time.Hour, BatchSize: 10, Now: now})
	require.NoError(t, err)
	require.Equal(t, []string{"deliveries", "deliveries", "deliveries", "keys", "secrets", "subscriptions", "attempts"}, f.calls)

	// BatchSize 0 is RetentionBatchDefault: one call takes 25.
	f = &fakeSweeper{due: due()}
	_, err = store.RetentionRun(t.Context(), f, &store.RetentionSweepParams{Delivered: time.Hour, Now: now})
	require.NoError(t, err)
	require.Equal(t, "keys", f.calls[1])

	f = &fakeSweeper{due: due(), fail: "keys"}
	res, err = store.RetentionRun(t.Context(), f, params)
	require.ErrorContains(t, err, "keys failed")
	require.Equal(t, &store.RetentionSweepResult{Deliveries: 25, Dead: 10, Events: 3}, res)
	require.Equal(t, "keys", f.calls[len(f.calls)-1])
}
