package push

import (
	"container/list"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits caps what one user agent or endpoint may hold or do, so that no
// anonymous client can fill a node's disk or keep its store busy (issue
// 20). A zero field means no cap; herald serve passes its --push-max-* and
// --push-*-rate flags, whose defaults are DefaultLimits.
type Limits struct {
	// MaxMessagesPerUAID caps the messages stored for one user agent;
	// beyond it a send is answered 429. Messages past --push-msg-limit are
	// dead weight anyway: reading them would reset the user agent.
	MaxMessagesPerUAID int
	// MaxMessagesPerChannel caps the messages stored for one channel, so
	// one site cannot take a user agent's whole allowance.
	MaxMessagesPerChannel int
	// MaxChannels caps the channels one user agent registers; a register
	// beyond it is answered with status 409.
	MaxChannels int
	// RegisterRate (per second) and RegisterBurst bound the registers of
	// one user agent; a register beyond them is answered with status 429.
	// The burst covers a browser that re-registers every subscription at
	// once after a uaid reset.
	RegisterRate  float64
	RegisterBurst int
	// SendRate (per second) and SendBurst bound the sends to one endpoint
	// (user agent and channel); beyond them a send is answered 429 with
	// Retry-After.
	SendRate  float64
	SendBurst int
}

// DefaultLimits are herald serve's defaults.
var DefaultLimits = Limits{
	MaxMessagesPerUAID:    DefaultMsgLimit,
	MaxMessagesPerChannel: 100,
	MaxChannels:           200,
	RegisterRate:          1,
	RegisterBurst:         100,
	SendRate:              10,
	SendBurst:             100,
}

// storedFullRetryAfter is the Retry-After of a send refused because the
// user agent's stored messages are at a cap: they go when it connects,
// which nobody can predict; five minutes keeps a retrying sender's load
// low.
const storedFullRetryAfter = 5 * time.Minute

// maxLimiterKeys bounds the buckets a keyedLimiter keeps (about 250 bytes
// each: 16 MiB at most).
const maxLimiterKeys = 1 << 16

// keyedLimiter is a token bucket (golang.org/x/time/rate) per key with
// bounded memory: at most maxKeys buckets, the least recently used one
// evicted first. An evicted key starts again with a full bucket, which
// only a client cycling through more than maxKeys keys can use. Limits
// are per node: N nodes allow N times the rate. A nil *keyedLimiter
// allows everything.
type keyedLimiter struct {
	limit   rate.Limit
	burst   int
	maxKeys int

	mu   sync.Mutex
	lru  *list.List // of *limiterEntry, most recently used first
	keys map[string]*list.Element
}

type limiterEntry struct {
	key string
	lim *rate.Limiter
}

// newKeyedLimiter returns a limiter of perSecond with burst, or nil when
// perSecond is not positive (no limit).
func newKeyedLimiter(perSecond float64, burst int) *keyedLimiter {
	if perSecond <= 0 {
		return nil
	}
	return &keyedLimiter{
		limit: rate.Limit(perSecond), burst: max(burst, 1), maxKeys: maxLimiterKeys,
		lru: list.New(), keys: map[string]*list.Element{},
	}
}

// allow takes a token of key at now; when there is none it takes nothing
// and returns how long until there is one.
func (l *keyedLimiter) allow(key string, now time.Time) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var e *limiterEntry
	if el, ok := l.keys[key]; ok {
		l.lru.MoveToFront(el)
		e = el.Value.(*limiterEntry)
	} else {
		if l.lru.Len() >= l.maxKeys {
			old := l.lru.Back()
			l.lru.Remove(old)
			delete(l.keys, old.Value.(*limiterEntry).key)
		}
		e = &limiterEntry{key: key, lim: rate.NewLimiter(l.limit, l.burst)}
		l.keys[key] = l.lru.PushFront(e)
	}
	r := e.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// len counts the buckets kept.
func (l *keyedLimiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}
