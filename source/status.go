package source

import (
	"sync"
	"time"

	"github.com/heraldhq/herald"
)

// stats is one runner's state and the counts not yet reported to the
// store. The runner writes it, the manager's reporter takes deltas out.
type stats struct {
	mu        sync.Mutex
	state     string
	lastError string
	pending   *int64
	consumed  int64
	dups      int64
	rejected  int64
	rejects   []herald.SourceReject
	changed   bool // something to report since the last take
}

func (s *stats) setState(state, lastError string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != state || s.lastError != lastError {
		s.state, s.lastError, s.changed = state, lastError, true
	}
}

func (s *stats) getState() (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state, s.lastError
}

func (s *stats) setPending(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil || *s.pending != n {
		s.pending, s.changed = &n, true
	}
}

// add counts a settled batch.
func (s *stats) add(consumed, dups int64, rejects []herald.SourceReject) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.consumed += consumed
	s.dups += dups
	s.rejected += int64(len(rejects))
	// Keep at most the newest SourceRecentRejects between reports: the
	// store keeps no more than that anyway.
	s.rejects = append(s.rejects, rejects...)
	if over := len(s.rejects) - herald.SourceRecentRejects; over > 0 {
		s.rejects = append(s.rejects[:0:0], s.rejects[over:]...)
	}
	if consumed > 0 || len(rejects) > 0 {
		s.changed = true
	}
}

// report is what take hands to the store.
type report struct {
	state, lastError         string
	pending                  *int64
	consumed, dups, rejected int64
	rejects                  []herald.SourceReject
	changed                  bool
}

// take returns the deltas since the last take and clears them.
func (s *stats) take() report {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := report{state: s.state, lastError: s.lastError, pending: s.pending, consumed: s.consumed,
		dups: s.dups, rejected: s.rejected, rejects: s.rejects, changed: s.changed}
	s.consumed, s.dups, s.rejected, s.rejects, s.changed = 0, 0, 0, nil, false
	return r
}

// putBack returns a report the store did not take (its deltas are added
// to what accumulated since).
func (s *stats) putBack(r report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.consumed += r.consumed
	s.dups += r.dups
	s.rejected += r.rejected
	s.rejects = append(r.rejects, s.rejects...)
	if over := len(s.rejects) - herald.SourceRecentRejects; over > 0 {
		s.rejects = s.rejects[over:]
	}
	s.changed = true
}

// now is time.Now in UTC, truncated to milliseconds as the stores keep it.
func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }
