package store_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
