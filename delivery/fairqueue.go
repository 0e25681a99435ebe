package delivery

// fairQueue is a tier's run queue of unbounded jobs (see runqueue.go): one
// FIFO per subscription, served round-robin, so a subscription with a few
// deliveries waits for at most one queued delivery of each other
// subscription, not for the whole queue. Without it a burst to one
// subscription (20,000 events through the batch API) filled the queue and
// every delivery of a steady subscription claimed meanwhile waited behind
// up to a worker count of the burst's (issue 28: the soak's steady p99
// during a burst). Within a subscription the order is the claim's, which
// ordered subscriptions rely on.
//
// Not safe for concurrent use: the tier's mu guards it.
type fairQueue struct {
	subs map[string]*subQueue
	// ring is the subscriptions with queued jobs, in serving order; next
	// indexes the one served next.
	ring []*subQueue
	next int
	n    int
}

type subQueue struct {
	id   string
	jobs []job
	head int
}

// push queues j behind its subscription's jobs.
func (q *fairQueue) push(j job) {
	id := j.c.Delivery.SubscriptionID // a claim's row always has it
	s := q.subs[id]
	if s == nil {
		if q.subs == nil {
			q.subs = make(map[string]*subQueue)
		}
		s = &subQueue{id: id}
		q.subs[id] = s
		// Joins the ring just before the one served next: served after
		// every subscription already waiting.
		q.ring = append(q.ring, nil)
		copy(q.ring[q.next+1:], q.ring[q.next:])
		q.ring[q.next] = s
		q.next = (q.next + 1) % len(q.ring)
	}
	if s.head > 0 && s.head >= len(s.jobs)/2 {
		// A subscription that never drains would keep its served prefix:
		// move the waiting jobs (at most as many as were served) down.
		n := copy(s.jobs, s.jobs[s.head:])
		clear(s.jobs[n:])
		s.jobs, s.head = s.jobs[:n], 0
	}
	s.jobs = append(s.jobs, j)
	q.n++
}

// pop takes the next subscription's oldest job.
func (q *fairQueue) pop() (job, bool) {
	if q.n == 0 {
		return job{}, false
	}
	s := q.ring[q.next]
	j := s.jobs[s.head]
	s.jobs[s.head] = job{}
	s.head++
	q.n--
	if s.head == len(s.jobs) {
		// Drained: leave the ring; the next subscription moves into place.
		delete(q.subs, s.id)
		last := len(q.ring) - 1
		copy(q.ring[q.next:], q.ring[q.next+1:])
		q.ring[last] = nil // no drained subscription kept past the ring's end
		q.ring = q.ring[:last]
		if q.next >= len(q.ring) {
			q.next = 0
		}
		return j, true
	}
	q.next = (q.next + 1) % len(q.ring)
	return j, true
}

// len is the number of queued jobs.
func (q *fairQueue) len() int { return q.n }
