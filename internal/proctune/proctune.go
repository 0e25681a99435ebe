package proctune

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// Defaults (Config).
const (
	// DefaultInterval is how often the process's CPU is read.
	DefaultInterval = 250 * time.Millisecond
	// DefaultUp: at one P, two intervals in a row that used more than
	// this share of a core on average raise GOMAXPROCS to Max (one P is
	// nearly full).
	DefaultUp = 0.85
	// DefaultDown: at Max, the process lowers GOMAXPROCS to one when it
	// used less than this share of a core on average over
	// DefaultDownAfter. Below DefaultUp, so the same load cannot flip it
	// back: a load costs no more CPU on one P than on several (measured
	// 8–19% less, median, on PostgreSQL).
	DefaultDown = 0.75
	// DefaultDownAfter is the span Down is averaged over.
	DefaultDownAfter = 2 * time.Second
	// fullP is the use of one interval at one P that raises GOMAXPROCS
	// alone: the P was busy nearly all the time.
	fullP = 0.95
	// LateWait, lateShare and lateMin: at one P, an interval in which at
	// least lateShare of at least lateMin goroutine wake-ups waited
	// LateWait or more to run raises GOMAXPROCS, whatever the CPU reads.
	// A node that shares its cores with other busy processes (PostgreSQL,
	// a load generator) can be saturated while using less than DefaultDown of a
	// core: there the P, not the CPU, is what it lacks.
	// Measured on a separate PostgreSQL node (runtime samples about 400
	// wake-ups an interval at 1,000/s): at 200/s and 1,000/s on one P 0–2.3%
	// of them waited 1 ms or more; saturated, 16–33%, on two Ps as on one.
	LateWait  = time.Millisecond
	lateShare = 0.10
	lateMin   = 200
	// contendedHold is how long GOMAXPROCS stays at Max after late
	// wake-ups raised it, so a saturated node on a shared machine does not
	// fall back to one P every DownAfter.
	contendedHold = 30 * time.Second
)

// Reading is what a step reads: the process's CPU time so far and the
// Config.Waits counts.
type Reading struct {
	CPU       time.Duration
	Late, All uint64
}

// Config configures a Tuner. Zero values take the defaults.
type Config struct {
	// Max is GOMAXPROCS under load (default runtime.GOMAXPROCS(0) when
	// Start is called).
	Max       int
	Interval  time.Duration
	DownAfter time.Duration
	// CPU returns the process's CPU time so far, user and system (default
	// getrusage(RUSAGE_SELF)); Set sets GOMAXPROCS (default
	// runtime.GOMAXPROCS). Tests replace both.
	CPU func() time.Duration
	// Waits returns how many times so far a goroutine made runnable
	// waited at least LateWait to run, and how many times one was made
	// runnable (default: runtime/metrics /sched/latencies:seconds).
	Waits func() (late, all uint64)
	Set   func(int)
	// OnChange, when set, is told each change (for a log line).
	OnChange func(procs int, cores float64)
}

// Tuner holds GOMAXPROCS at one while the process is nearly idle and at
// Max while it is busy.
type Tuner struct {
	cfg  Config
	stop chan struct{}
	done chan struct{}
	once sync.Once
	// restore undoes the tuning at Stop.
	restore func()

	mu    sync.Mutex
	procs int           // the GOMAXPROCS last set
	last  Reading       // at the previous step
	hold  time.Duration // left of contendedHold
	// prevUsed and prevSpan are the previous interval's CPU and length
	// (DefaultUp's mean); lowUsed and lowSpan add up CPU and time at Max since
	// the last DefaultDown check.
	prevUsed, prevSpan time.Duration
	lowUsed, lowSpan   time.Duration
}

// New returns a Tuner that has set nothing yet; Start runs it.
func New(cfg Config) *Tuner {
	if cfg.Max <= 0 {
		cfg.Max = runtime.GOMAXPROCS(0)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.DownAfter <= 0 {
		cfg.DownAfter = DefaultDownAfter
	}
	if cfg.CPU == nil {
		cfg.CPU = processCPU
	}
	if cfg.Waits == nil {
		cfg.Waits = schedWaits()
	}
	t := &Tuner{cfg: cfg, procs: cfg.Max, stop: make(chan struct{}), done: make(chan struct{})}
	t.restore = func() { t.cfg.Set(t.cfg.Max) }
	if cfg.Set == nil {
		t.cfg.Set = func(n int) { runtime.GOMAXPROCS(n) }
		// Back to the runtime's own default, which follows the CPU limit
		// again (a GOMAXPROCS call turns that off).
		t.restore = func() { runtime.SetDefaultGOMAXPROCS() }
	}
	return t
}

// Start runs the tuner until Stop; it returns nil, changing nothing, when
// Max is 1 (nothing to lower) or the process's CPU time cannot be read.
func Start(cfg Config) *Tuner {
	if cfg.CPU == nil && !canReadCPU {
		return nil // no way to tell load from idle here
	}
	t := New(cfg)
	if t.cfg.Max <= 1 {
		return nil
	}
	t.last = t.read()
	go t.loop()
	return t
}

func (t *Tuner) loop() {
	defer close(t.done)
	tk := time.NewTicker(t.cfg.Interval)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tk.C:
			t.Step(t.read(), t.cfg.Interval)
		}
	}
}

func (t *Tuner) read() Reading {
	late, all := t.cfg.Waits()
	return Reading{CPU: t.cfg.CPU(), Late: late, All: all}
}

// Step takes a reading and the span since the last step, and sets
// GOMAXPROCS when they call for it. It returns the GOMAXPROCS in force
// after it.
//
// At one P, an interval over fullP, or the mean of this interval and the
// one before over DefaultUp, raises it to Max: a burst that fills the P waits one
// interval, and one busy interval short of full (a collection, a large
// commit) does not count alone. So do late wake-ups (LateWait), and then
// Max holds for contendedHold. At Max, the mean over DownAfter under
// DefaultDown lowers it to one.
func (t *Tuner) Step(r Reading, span time.Duration) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	used := r.CPU - t.last.CPU
	late, all := r.Late-t.last.Late, r.All-t.last.All
	t.last = r
	if span <= 0 {
		return t.procs
	}
	prevUsed, prevSpan := t.prevUsed, t.prevSpan
	t.prevUsed, t.prevSpan = used, span
	if t.procs < t.cfg.Max {
		if all >= lateMin && float64(late) >= lateShare*float64(all) {
			t.set(t.cfg.Max, used.Seconds()/span.Seconds())
			t.lowUsed, t.lowSpan = 0, 0
			t.hold = contendedHold
			return t.procs
		}
		cores := used.Seconds() / span.Seconds()
		if cores <= fullP {
			if prevSpan == 0 { // the first interval on one P has no pair
				return t.procs
			}
			cores = (prevUsed + used).Seconds() / (prevSpan + span).Seconds()
		}
		if cores > DefaultUp {
			t.set(t.cfg.Max, cores)
			t.lowUsed, t.lowSpan = 0, 0
		}
		return t.procs
	}
	if t.hold > 0 {
		t.hold -= span
		return t.procs
	}
	t.lowUsed += used
	t.lowSpan += span
	if t.lowSpan >= t.cfg.DownAfter {
		cores := t.lowUsed.Seconds() / t.lowSpan.Seconds()
		t.lowUsed, t.lowSpan = 0, 0
		if cores < DefaultDown {
			t.set(1, cores)
			t.prevUsed, t.prevSpan = 0, 0
		}
	}
	return t.procs
}

func (t *Tuner) set(n int, cores float64) {
	t.cfg.Set(n)
	t.procs = n
	if t.cfg.OnChange != nil {
		t.cfg.OnChange(n, cores)
	}
}

// Procs is the GOMAXPROCS the tuner last set.
func (t *Tuner) Procs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.procs
}

// Stop ends the tuning and restores Max. Safe on nil and more than once.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.once.Do(func() {
		close(t.stop)
		<-t.done
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.procs != t.cfg.Max {
			t.restore()
			t.procs = t.cfg.Max
		}
	})
}

// schedWaits returns a reader of the runtime's scheduling latencies: the
// wake-ups that waited LateWait or more, and all of them, so far.
func schedWaits() func() (late, all uint64) {
	sample := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	return func() (late, all uint64) {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindFloat64Histogram {
			return 0, 0
		}
		h := sample[0].Value.Float64Histogram()
		for i, n := range h.Counts {
			all += n
			if h.Buckets[i] >= LateWait.Seconds() {
				late += n
			}
		}
		return late, all
	}
}
