package delivery

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAssignWorkersEdgeCases(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name    string
		workers int
		backlog []int64
		check   func(t *testing.T, got []int)
	}{
		{"one worker one tier", 1, []int64{0}, func(t *testing.T, got []int) { require.Equal(t, []int{1}, got) }},
		{"two workers one tier", 2, []int64{0}, func(t *testing.T, got []int) { require.Equal(t, []int{2}, got) }},
		{"one worker two tiers", 1, []int64{0, 0}, func(t *testing.T, got []int) {
			require.Equal(t, 1, got[0]+got[1])
		}},
		{"equal", 3, []int64{5, 0, 100}, func(t *testing.T, got []int) { require.Equal(t, []int{1, 1, 1}, got) }},
		{"more workers than tiers", 10, []int64{0, 0, 0}, func(t *testing.T, got []int) {
			require.Equal(t, 10, got[0]+got[1]+got[2])
			for _, g := range got {
				require.GreaterOrEqual(t, g, 1)
			}
		}},
		{"no workers", 0, []int64{1, 2}, func(t *testing.T, got []int) { require.Equal(t, []int{0, 0}, got) }},
		{"no tiers", 4, nil, func(t *testing.T, got []int) { require.Empty(t, got) }},
		{"negative backlog treated as empty", 5, []int64{-10, 0}, func(t *testing.T, got []int) {
			require.Equal(t, 5, got[0]+got[1])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, AssignWorkers(tt.workers, tt.backlog, rnd))
		})
	}
}

// The surplus goes to tiers in proportion to backlog+1 (a weighted
// choice): with backlogs 100 and 50 the second tier gets about half as many
// extra workers as the first.
func TestAssignWorkersSurplusWeighting(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(7, 7))
	const repeats = 2000
	cov := make([]int, 2)
	for i := 0; i < repeats; i++ {
		got := AssignWorkers(10, []int64{100, 50}, rnd)
		require.GreaterOrEqual(t, got[0], 1)
		require.GreaterOrEqual(t, got[1], 1)
		cov[0] += got[0]
		cov[1] += got[1]
	}
	require.Equal(t, repeats*10, cov[0]+cov[1])
	ratio := float64(cov[1]-repeats) / float64(cov[0]-repeats)
	require.InDelta(t, 51.0/101.0, ratio, 0.05)
}

// With fewer workers than tiers, a tier's share follows its backlog+1.
func TestAssignWorkersShortageWeighting(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(3, 4))
	const repeats = 4000
	backlog := append([]int64{100}, make([]int64, 9)...)
	for i := 1; i < 10; i++ {
		backlog[i] = 50
	}
	cov := make([]int, 10)
	for i := 0; i < repeats; i++ {
		got := AssignWorkers(2, backlog, rnd)
		total := 0
		for j, g := range got {
			cov[j] += g
			total += g
		}
		require.Equal(t, 2, total)
	}
	var short float64
	for _, c := range cov[1:] {
		short += float64(c)
	}
	short /= 9
	require.InDelta(t, 51.0/101.0, short/float64(cov[0]), 0.1)
	for j, c := range cov {
		require.Positive(t, c, "tier %d never got a worker", j)
	}
}
