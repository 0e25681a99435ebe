package delivery

import "math/rand/v2"

// AssignWorkers spreads workers over len(backlog) tiers and returns the
// number of workers per tier.
//
//   - workers < tiers: each worker goes to a tier drawn at random with
//     weight backlog+1 (with replacement, so several may share a tier; over
//     successive rebalances every tier is visited).
//   - workers == tiers: one each.
//   - workers > tiers: one each, then the surplus drawn as above.
//
// The +1 keeps empty tiers reachable and the total weight above zero.
func AssignWorkers(workers int, backlog []int64, rnd *rand.Rand) []int {
	n := len(backlog)
	out := make([]int, n)
	if n == 0 || workers <= 0 {
		return out
	}
	extra := workers
	if workers >= n {
		for i := range out {
			out[i] = 1
		}
		extra = workers - n
	}
	if extra == 0 {
		return out
	}
	cum := make([]float64, n)
	var total float64
	for i, b := range backlog {
		if b < 0 {
			b = 0
		}
		total += float64(b) + 1
		cum[i] = total
	}
	for k := 0; k < extra; k++ {
		x := rnd.Float64() * total
		i := 0
		for i < n-1 && x >= cum[i] {
			i++
		}
		out[i]++
	}
	return out
}
