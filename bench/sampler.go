package bench

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Sample is one --sample interval.
type Sample struct {
	// AtS is the end of the interval, in seconds since publishing began.
	AtS float64 `json:"at_s"`
	// Published and Delivered per second over the interval.
	PublishedPerS float64 `json:"published_per_s"`
	DeliveredPerS float64 `json:"delivered_per_s"`
	// Backlog is deliveries accepted but not yet received.
	Backlog int64 `json:"backlog"`
	// LatencyP99Ms is the publish→delivery p99 of the interval's deliveries.
	LatencyP99Ms float64 `json:"latency_p99_ms"`
	// PublishCallP99Ms is the p99 of the interval's publish calls (the
	// measured load's, not a --burst's): how much of LatencyP99Ms the
	// node's answer took, the rest being delivery.
	PublishCallP99Ms float64 `json:"publish_call_p99_ms"`
	// HeapMB is the Go heap in use and RSSMB the process's resident set
	// (publisher, node and receiver share the process).
	HeapMB float64 `json:"heap_mb"`
	RSSMB  float64 `json:"rss_mb"`
}

// sampleRun records a Sample every interval until the returned stop.
func sampleRun(every time.Duration, start time.Time, p *publisher, recv sink) (stop func() []Sample) {
	done := make(chan struct{})
	var out []Sample
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tk := time.NewTicker(every)
		defer tk.Stop()
		lastPub, lastDel, last := int64(0), int64(0), start
		mark, callMark := recv.Latency().Mark(), p.calls.Mark()
		for {
			select {
			case <-done:
				return
			case now := <-tk.C:
				pub, del := p.accepted.Load(), recv.Delivered()
				dt := now.Sub(last).Seconds()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				p99 := recv.Latency().QuantilesSince(mark, 0.99)[0]
				mark = recv.Latency().Mark()
				callP99 := p.calls.QuantilesSince(callMark, 0.99)[0]
				callMark = p.calls.Mark()
				out = append(out, Sample{
					AtS:              now.Sub(start).Seconds(),
					PublishedPerS:    float64(pub-lastPub) / dt,
					DeliveredPerS:    float64(del-lastDel) / dt,
					Backlog:          p.wanted.Load() - del,
					LatencyP99Ms:     p99,
					PublishCallP99Ms: callP99,
					HeapMB:           float64(ms.HeapInuse) / (1 << 20),
					RSSMB:            rssBytes("self") / (1 << 20),
				})
				lastPub, lastDel, last = pub, del, now
			}
		}
	}()
	return func() []Sample { close(done); <-finished; return out }
}

// progressLine writes published, delivered, backlog and errors to w every
// 500 ms, over one terminal line, until the returned stop.
func progressLine(w io.Writer, p *publisher, recv sink) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tk := time.NewTicker(500 * time.Millisecond)
		defer tk.Stop()
		lastPub, lastDel, last := int64(0), int64(0), time.Now()
		for {
			select {
			case <-done:
				fmt.Fprintln(w)
				return
			case now := <-tk.C:
				pub, del := p.accepted.Load(), recv.Delivered()
				dt := now.Sub(last).Seconds()
				fmt.Fprintf(w, "\r\033[Kpublished %d (%.0f/s)  delivered %d (%.0f/s)  backlog %d  errors %d",
					pub, float64(pub-lastPub)/dt, del, float64(del-lastDel)/dt, p.wanted.Load()-del, p.errors.Load())
				lastPub, lastDel, last = pub, del, now
			}
		}
	}()
	return func() { close(done); <-finished }
}

// rssBytes reads a process's resident set from /proc/<pid>/status (pid
// "self": this one); 0 where there is no /proc.
func rssBytes(pid string) float64 {
	raw, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// cpuSeconds reads a process's user+system CPU time from /proc/<pid>/stat;
// 0 where there is no /proc.
func cpuSeconds(pid string) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which is in parentheses): utime and
	// stime are the 12th and 13th of them, in clock ticks (100 Hz on Linux).
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}
