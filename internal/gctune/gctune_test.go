package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPercent(t *testing.T) {
	t.Parallel()
	const mb = 1 << 20
	tests := []struct {
		live, floor uint64
		base, want  int
	}{
		{8 * mb, 64 * mb, 100, 700},   // goal 8×8 = 64 MB
		{16 * mb, 64 * mb, 100, 300},  // 16×4
		{32 * mb, 64 * mb, 100, 100},  // doubling reaches the floor
		{200 * mb, 64 * mb, 100, 100}, // a large heap is paced as Go does
		{1 * mb, 64 * mb, 100, maxPercent},
		{0, 64 * mb, 100, 100}, // before the first cycle
		{40 * mb, 64 * mb, 100, 100},
		{30 * mb, 64 * mb, 150, 150}, // never below the configured GOGC
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, Percent(tt.live, tt.floor, tt.base), "live %d floor %d base %d", tt.live, tt.floor, tt.base)
	}
}

// gogc reads the process's GOGC.
func gogc() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// Not parallel: GOGC is the process's.
func TestTuneFollowsEachCycle(t *testing.T) {
	require.Nil(t, Tune(0, 100), "a zero floor is off")
	require.Nil(t, Tune(64<<20, -1), "GOGC=off is left alone")
	require.Equal(t, 100, gogc())

	tn := Tune(64<<20, 100)
	require.NotNil(t, tn)
	// The test binary's live heap is a few MB: after a cycle the floor
	// asks for more than doubling.
	deadline := time.Now().Add(10 * time.Second)
	for gogc() == 100 {
		require.True(t, time.Now().Before(deadline), "GOGC stayed 100 with a small live heap")
		runtime.GC()
		time.Sleep(time.Millisecond)
	}

	// A cycle that finds a large live heap brings GOGC back to 100.
	big := make([][]byte, 0, 96)
	for range 96 {
		big = append(big, make([]byte, 1<<20))
	}
	for gogc() != 100 {
		require.True(t, time.Now().Before(deadline), "GOGC stayed %d with a 96 MB live heap", gogc())
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	runtime.KeepAlive(big)
	big = nil
	for gogc() == 100 {
		require.True(t, time.Now().Before(deadline), "GOGC stayed 100 once the heap was small again")
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	_ = big

	tn.Stop()
	require.Equal(t, 100, gogc(), "Stop restores the configured GOGC")
	runtime.GC()
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	require.Equal(t, 100, gogc(), "no cycle tunes after Stop")
	var none *Tuner
	none.Stop()
}
