package push

// This file holds what runs sessions without a goroutine of their own
// (ADR 0027): the events a session is scheduled for, the worker pool that
// runs a scheduled session, and the one timer heap that holds every
// session's deadlines. Readiness of the sockets comes from the poller
// (poll_linux.go), or, for a socket that has no file descriptor to poll (a
// wrapped net.Conn), from a reader goroutine of its own (blockingReader).
//
// All three are shared by every hub of the process and started on first
// use; they live as long as the process, as net/http's own poller does.

import (
	"container/heap"
	"runtime"
	"sync"
	"time"
)

// Events a session is scheduled for (conn.events). evQueued marks a
// session that is queued or running: it is run by one worker at a time.
const (
	evRead   uint32 = 1 << iota // the socket is readable (or its reader has bytes)
	evTimer                     // one of its deadlines passed
	evWake                      // its state changed from elsewhere (closing): look again
	evAbort                     // a write failed: end the socket
	evQueued uint32 = 1 << 31
)

// schedule records ev for c and queues c unless it is queued or running.
func (c *conn) schedule(ev uint32) {
	for {
		old := c.events.Load()
		if c.events.CompareAndSwap(old, old|ev|evQueued) {
			if old&evQueued == 0 {
				sessions().pool.submit(c)
			}
			return
		}
	}
}

// takeEvents returns the events recorded since the last call, or 0, and
// then c is no longer queued: a later schedule queues it again.
func (c *conn) takeEvents() uint32 {
	for {
		old := c.events.Load()
		ev := old &^ evQueued
		if ev == 0 {
			if c.events.CompareAndSwap(old, 0) {
				return 0
			}
			continue
		}
		if c.events.CompareAndSwap(old, evQueued) {
			return ev
		}
	}
}

// runtimeState is the process-wide machinery: workers, timers, pollers.
type runtimeState struct {
	pool   *workerPool
	timers *timerHeap
	poll   *poller // nil where there is no epoll
}

var (
	sessionsOnce sync.Once
	sessionsRT   *runtimeState
)

// sessions returns the process-wide machinery, starting it on first use.
func sessions() *runtimeState {
	sessionsOnce.Do(func() {
		sessionsRT = &runtimeState{
			pool:   &workerPool{max: maxWorkers},
			timers: newTimerHeap(),
			poll:   newPoller(pollerCount()),
		}
	})
	return sessionsRT
}

// maxWorkers bounds the goroutines that run sessions' work at once (a
// frame's handler, a deadline, a teardown). The handlers wait on the store
// (10 s at most each, storeTimeout) and on writes (writeWait), so the
// bound is well above the CPUs; more work than this waits in the queue.
// Workers are started as work comes and stay parked afterwards.
const maxWorkers = 128

// pollerCount is how many epoll instances (one goroutine each, blocked in
// epoll_wait) share the sockets: one per 4 CPUs, at least one. A readable
// socket costs the poller only a hand-off to the pool.
func pollerCount() int { return max(1, runtime.GOMAXPROCS(0)/4) }

// workerPool runs queued sessions.
type workerPool struct {
	mu    sync.Mutex
	cond  *sync.Cond
	queue []*conn
	head  int
	n     int // workers started
	idle  int // workers waiting and not yet woken for an item
	max   int
}

func (p *workerPool) submit(c *conn) {
	p.mu.Lock()
	if p.cond == nil {
		p.cond = sync.NewCond(&p.mu)
	}
	p.queue = append(p.queue, c)
	switch {
	case p.idle > 0:
		// Counted out here, not when it wakes: a burst of submits
		// before it runs must wake or start one worker each, not signal
		// the same sleeper again while the items queue behind workers
		// that wait on the store (issue 25's reconnect storm, where
		// hellos then passed their handshake deadline unread).
		p.idle--
		p.cond.Signal()
	case p.n < p.max:
		p.n++
		go p.work()
	}
	p.mu.Unlock()
}

func (p *workerPool) work() {
	p.mu.Lock()
	for {
		for p.head == len(p.queue) {
			p.idle++
			p.cond.Wait()
		}
		c := p.queue[p.head]
		p.queue[p.head] = nil
		p.head++
		if p.head == len(p.queue) {
			// Drained: reuse the array from its start (a burst's
			// array is dropped once it is large and empty).
			if cap(p.queue) > 4096 {
				p.queue = nil
			} else {
				p.queue = p.queue[:0]
			}
			p.head = 0
		}
		p.mu.Unlock()
		c.run()
		p.mu.Lock()
	}
}

// Deadline kinds of a session (conn.deadlines). Each is a point on the
// timer heap's clock, 0 when not set.
const (
	dlKeepalive = iota // next ping tick, or the pong deadline
	dlFrame            // an incomplete frame or message must be complete by then
	dlGrace            // a closing session's socket is dropped then (closeGrace)
	dlResume           // a paused session reads again then (pauseReads)
	numDeadlines
	// dlHandshake (hello must be answered by then, HandshakeTimeout)
	// shares dlKeepalive's slot: the keepalive starts once hello is
	// answered.
	dlHandshake = dlKeepalive
)

// timerHeap holds the sessions with a deadline, earliest first: one
// goroutine and one runtime timer for all of them, instead of a timer per
// session. A session is on the heap once, at its earliest deadline; when
// that passes it is scheduled with evTimer and takes what expired
// (expired), which puts it back at its next one.
type timerHeap struct {
	mu    sync.Mutex
	items timerItems
	wake  chan struct{}
	base  time.Time
}

// timerItems is the heap order of container/heap.
type timerItems []*conn

func (t timerItems) Len() int           { return len(t) }
func (t timerItems) Less(i, j int) bool { return t[i].earliest() < t[j].earliest() }

// earliest is c's earliest deadline, 0 when none. Called with the heap's
// lock held.
func (c *conn) earliest() int64 {
	var at int64
	for _, d := range c.deadlines {
		if d != 0 && (at == 0 || d < at) {
			at = d
		}
	}
	return at
}
func (t timerItems) Swap(i, j int) {
	t[i], t[j] = t[j], t[i]
	t[i].tIdx, t[j].tIdx = int32(i), int32(j)
}
func (t *timerItems) Push(x any) {
	c := x.(*conn)
	c.tIdx = int32(len(*t))
	*t = append(*t, c)
}
func (t *timerItems) Pop() any {
	old := *t
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*t = old[:len(old)-1]
	c.tIdx = -1
	return c
}

func newTimerHeap() *timerHeap {
	t := &timerHeap{wake: make(chan struct{}, 1), base: time.Now()}
	go t.loop()
	return t
}

// now is the heap's clock: monotonic nanoseconds since it started.
func (t *timerHeap) now() int64 { return int64(time.Since(t.base)) }

// arm sets c's deadline kind to d from now.
func (t *timerHeap) arm(c *conn, kind int, d time.Duration) {
	t.mu.Lock()
	c.deadlines[kind] = t.now() + max(int64(d), 1)
	t.fix(c)
	t.mu.Unlock()
}

// disarm clears c's deadline kind.
func (t *timerHeap) disarm(c *conn, kind int) {
	t.mu.Lock()
	if c.deadlines[kind] != 0 {
		c.deadlines[kind] = 0
		t.fix(c)
	}
	t.mu.Unlock()
}

// stop clears every deadline of c.
func (t *timerHeap) stop(c *conn) {
	t.mu.Lock()
	c.deadlines = [numDeadlines]int64{}
	t.fix(c)
	t.mu.Unlock()
}

// expired clears and returns (as a bit per kind) c's deadlines that passed.
func (t *timerHeap) expired(c *conn) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var due uint32
	for k, at := range c.deadlines {
		if at != 0 && at <= now {
			due |= 1 << k
			c.deadlines[k] = 0
		}
	}
	t.fix(c)
	return due
}

// fix puts c on the heap at its earliest deadline, or takes it off.
// Called with mu held.
func (t *timerHeap) fix(c *conn) {
	switch {
	case c.earliest() == 0:
		if c.tIdx >= 0 {
			heap.Remove(&t.items, int(c.tIdx))
		}
		return
	case c.tIdx >= 0:
		heap.Fix(&t.items, int(c.tIdx))
	default:
		heap.Push(&t.items, c)
	}
	if t.items[0] == c {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

func (t *timerHeap) loop() {
	timer := time.NewTimer(time.Hour)
	for {
		t.mu.Lock()
		now := t.now()
		var due []*conn
		for len(t.items) > 0 && t.items[0].earliest() <= now {
			due = append(due, heap.Pop(&t.items).(*conn))
		}
		wait := time.Hour
		if len(t.items) > 0 {
			wait = time.Duration(t.items[0].earliest() - now)
		}
		t.mu.Unlock()
		for _, c := range due {
			c.schedule(evTimer)
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-t.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

// blockingReader reads a socket that cannot be polled (a net.Conn
// wrapper without a file descriptor, as tests' listeners make) on a
// goroutine of its own, with the poller's contract: a read only when the
// session asks for one (arm), bytes handed over with evRead.
type blockingReader struct {
	c    *conn
	arms chan struct{}
	quit chan struct{}
	buf  []byte
	data []byte
	err  error
}

func newBlockingReader(c *conn) *blockingReader {
	r := &blockingReader{c: c, arms: make(chan struct{}, 1), quit: make(chan struct{})}
	go r.loop()
	return r
}

func (r *blockingReader) loop() {
	for {
		select {
		case <-r.arms:
		case <-r.quit:
			return
		}
		if r.buf == nil {
			r.buf = make([]byte, 4096)
		}
		n, err := r.c.nc.Read(r.buf)
		r.data, r.err = r.buf[:n], err
		r.c.schedule(evRead)
		if err != nil {
			return
		}
	}
}

func (r *blockingReader) arm() {
	select {
	case r.arms <- struct{}{}:
	default:
	}
}

// read hands over what the last read got: (0, nil) when nothing.
func (r *blockingReader) read(p []byte) (int, error) {
	n := copy(p, r.data)
	r.data = r.data[n:]
	if len(r.data) > 0 {
		return n, nil
	}
	err := r.err
	r.err = nil
	return n, err
}

func (r *blockingReader) close() { close(r.quit) }

// readBufferPool holds the buffers a readable socket is read into: one
// per running worker at most, none per session.
var readBufferPool = sync.Pool{New: func() any {
	b := make([]byte, readBufferSize)
	return &b
}}
