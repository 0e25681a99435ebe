package proctune_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/proctune"
)

// rig drives a Tuner by hand: cpu is the process's CPU time it reads, set
// records each GOMAXPROCS it sets.
type rig struct {
	t   *proctune.Tuner
	r   proctune.Reading
	set []int
}

func newRig(max int) *rig {
	r := &rig{}
	r.t = proctune.New(proctune.Config{Max: max, Set: func(n int) { r.set = append(r.set, n) }})
	return r
}

const q = proctune.DefaultInterval

// per is the intervals in DownAfter.
var per = int(proctune.DefaultDownAfter / q)

// use steps the tuner over one interval during which the process used
// cores.
func (r *rig) use(cores float64) int {
	r.r.CPU += time.Duration(cores * float64(q))
	r.r.All += 1000 // wake-ups, none late
	return r.t.Step(r.r, q)
}

// contended steps over one interval in which the process used cores and
// late of all wake-ups waited LateWait or more.
func (r *rig) contended(cores float64, late, all uint64) int {
	r.r.CPU += time.Duration(cores * float64(q))
	r.r.Late += late
	r.r.All += all
	return r.t.Step(r.r, q)
}

// lower brings a rig at Max down to one P.
func (r *rig) lower(t *testing.T) {
	t.Helper()
	for range per {
		r.use(0)
	}
	require.Equal(t, 1, r.t.Procs())
}

func TestLowMeanLowersAfterDownAfter(t *testing.T) {
	r := newRig(4)
	for i := 1; i < per; i++ {
		require.Equal(t, 4, r.use(0.1), "interval %d: not yet %s", i, proctune.DefaultDownAfter)
	}
	require.Equal(t, 1, r.use(0.1))
	require.Equal(t, []int{1}, r.set)
}

func TestTheMeanDecidesNotOneInterval(t *testing.T) {
	r := newRig(2)
	// One interval over Down in a span whose mean is under it: lowered.
	for i := range per {
		c := 0.5
		if i == 2 {
			c = proctune.DefaultDown + 0.2
		}
		r.use(c)
	}
	require.Equal(t, 1, r.t.Procs())

	// A mean over Down keeps Max, span after span.
	r = newRig(2)
	for range 5 * per {
		require.Equal(t, 2, r.use(proctune.DefaultDown+0.02))
	}
	require.Empty(t, r.set)
}

func TestBusyIntervalsRaise(t *testing.T) {
	r := newRig(8)
	r.lower(t)
	// One busy interval between quiet ones: a collection, not load.
	require.Equal(t, 1, r.use(0.2))
	require.Equal(t, 1, r.use(0.94))
	require.Equal(t, 1, r.use(0.2))
	require.Equal(t, 1, r.use(proctune.DefaultUp-0.05))
	require.Equal(t, 1, r.use(proctune.DefaultUp-0.05), "a mean just under Up stays on one P")
	require.Equal(t, 8, r.use(proctune.DefaultUp+0.2), "a mean over Up: Max")
	require.Equal(t, []int{1, 8}, r.set)
	// Between Down and Up at Max: no flapping back.
	for range 5 * per {
		require.Equal(t, 8, r.use((proctune.DefaultDown+proctune.DefaultUp)/2))
	}
	// Saturated from quiet: Max after one full interval.
	r = newRig(2)
	r.lower(t)
	require.Equal(t, 1, r.use(0.1))
	require.Equal(t, 2, r.use(1.0))
	// The first interval on one P decides alone only when full.
	r = newRig(2)
	r.lower(t)
	require.Equal(t, 1, r.use(0.9))
	require.Equal(t, 2, r.use(0.9))
}

func TestZeroSpanChangesNothing(t *testing.T) {
	r := newRig(2)
	require.Equal(t, 2, r.t.Step(proctune.Reading{CPU: time.Second}, 0))
	require.Empty(t, r.set)
}

func TestStartStopRestoresMax(t *testing.T) {
	require.Nil(t, proctune.Start(proctune.Config{Max: 1}), "nothing to lower on one P")

	set := make(chan int, 16)
	tu := proctune.Start(proctune.Config{
		Max: 3, Interval: time.Millisecond, DownAfter: 2 * time.Millisecond,
		CPU:   func() time.Duration { return 0 }, // idle
		Waits: func() (uint64, uint64) { return 0, 0 },
		Set:   func(n int) { set <- n },
	})
	require.NotNil(t, tu)
	select {
	case n := <-set:
		require.Equal(t, 1, n)
	case <-time.After(10 * time.Second):
		t.Fatal("an idle process was not lowered to one P")
	}
	tu.Stop()
	tu.Stop()
	require.Equal(t, 3, <-set, "Stop restores Max")
	tu = nil
	tu.Stop() // safe on nil
}

func TestLateWakeupsRaiseAndHold(t *testing.T) {
	r := newRig(2)
	r.lower(t)
	require.Equal(t, 1, r.contended(0.5, 30, 1000), "3% late: not contended")
	require.Equal(t, 1, r.contended(0.5, 100, 150), "too few wake-ups to judge")
	require.Equal(t, 2, r.contended(0.5, 150, 1000), "15% late at half a core: the P is short")
	// Held at Max well past DownAfter, though the CPU reads low.
	for range int(20 * time.Second / q) {
		require.Equal(t, 2, r.use(0.5))
	}
	for range int(15 * time.Second / q) {
		r.use(0.5)
	}
	require.Equal(t, 1, r.t.Procs(), "lowered once the hold and a low DownAfter have passed")
}

func TestSchedWaitsReadsTheRuntime(t *testing.T) {
	tu := proctune.Start(proctune.Config{Max: 2, Interval: time.Hour, Set: func(int) {}})
	require.NotNil(t, tu)
	defer tu.Stop()
	late, all := proctune.SchedWaits()()
	require.Positive(t, all, "the runtime counted wake-ups")
	require.LessOrEqual(t, late, all)
}
