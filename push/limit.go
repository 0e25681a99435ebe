package push

import (
	"container/list"
	"math"
	"net/netip"
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
	// RegisterIPRate (per second) and RegisterIPBurst bound the registers
	// of all user agents at one client address (an IPv6 /64, as
	// MaxConnsPerIP counts it): a client that reconnects without its uaid
	// gets a new user agent and a fresh RegisterBurst each time, but not a
	// fresh address. The burst covers the browsers behind one office NAT
	// re-registering after a reset. Beyond them: status 429.
	RegisterIPRate  float64
	RegisterIPBurst int
	// RegisterNodeRate (per second, with a burst of as many) bounds the
	// registers of this node, whatever the number of addresses they come
	// from: each is a store transaction, on the store the node's webhook
	// deliveries use. Beyond it: status 429.
	RegisterNodeRate float64
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
	RegisterIPRate:        5,
	RegisterIPBurst:       200,
	RegisterNodeRate:      100,
	SendRate:              10,
	SendBurst:             100,
}

// registerLimit applies the register limits of Limits in turn: the user
// agent's, its client address's, then the node's. A register refused by a
// later one gives back the tokens the earlier ones took, so a refusal by
// the node costs the client nothing, and the node's bucket is spent only
// by registers the narrower limits allowed (a client over its own limit
// cannot drain it).
type registerLimit struct {
	uaid *keyedLimiter[string]
	addr *keyedLimiter[netip.Addr]
	node *rate.Limiter // nil: no node-wide limit
}

func newRegisterLimit(l Limits) *registerLimit {
	r := &registerLimit{
		uaid: newKeyedLimiter[string](l.RegisterRate, l.RegisterBurst),
		addr: newKeyedLimiter[netip.Addr](l.RegisterIPRate, l.RegisterIPBurst),
	}
	if l.RegisterNodeRate > 0 {
		r.node = rate.NewLimiter(rate.Limit(l.RegisterNodeRate), max(int(math.Ceil(l.RegisterNodeRate)), 1))
	}
	return r
}

// allow takes a register token of the user agent uaid at the client
// address addr; when any limit has none it takes nothing and returns how
// long until the limit that refused has one again.
func (l *registerLimit) allow(uaid string, addr netip.Addr, now time.Time) (bool, time.Duration) {
	ru, ok, wait := l.uaid.take(uaid, now)
	if !ok {
		return false, wait
	}
	ra, ok, wait := l.addr.take(addr, now)
	if ok && l.node != nil {
		rn := l.node.ReserveN(now, 1)
		if d := rn.DelayFrom(now); d > 0 {
			wait = d
			rn.CancelAt(now)
			giveBack(ra, now)
			ok = false
		}
	}
	if !ok {
		giveBack(ru, now)
	}
	return ok, wait
}

// maxRefusedPause bounds how long a session's reads pause after a
// register refused for its rate (see conn.pauseReads).
const maxRefusedPause = time.Second

// endpointKey keys the send limit: one bucket per endpoint (user agent and
// channel), without building a string per send.
type endpointKey struct{ uaid, channelID string }

// giveBack returns the token of r (nil: none was taken).
func giveBack(r *rate.Reservation, now time.Time) {
	if r != nil {
		r.CancelAt(now)
	}
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
type keyedLimiter[K comparable] struct {
	limit   rate.Limit
	burst   int
	maxKeys int

	mu   sync.Mutex
	lru  *list.List // of *limiterEntry[K], most recently used first
	keys map[K]*list.Element
}

type limiterEntry[K comparable] struct {
	key K
	lim *rate.Limiter
}

// newKeyedLimiter returns a limiter of perSecond with burst, or nil when
// perSecond is not positive (no limit).
func newKeyedLimiter[K comparable](perSecond float64, burst int) *keyedLimiter[K] {
	if perSecond <= 0 {
		return nil
	}
	return &keyedLimiter[K]{
		limit: rate.Limit(perSecond), burst: max(burst, 1), maxKeys: maxLimiterKeys,
		lru: list.New(), keys: map[K]*list.Element{},
	}
}

// allow takes a token of key at now; when there is none it takes nothing
// and returns how long until there is one.
func (l *keyedLimiter[K]) allow(key K, now time.Time) (bool, time.Duration) {
	_, ok, d := l.take(key, now)
	return ok, d
}

// take is allow that also returns the token taken (nil when l is nil or
// nothing was taken), so that a caller refused by a later limit can give
// it back with CancelAt.
func (l *keyedLimiter[K]) take(key K, now time.Time) (*rate.Reservation, bool, time.Duration) {
	if l == nil {
		return nil, true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var e *limiterEntry[K]
	if el, ok := l.keys[key]; ok {
		l.lru.MoveToFront(el)
		e = el.Value.(*limiterEntry[K])
	} else {
		if l.lru.Len() >= l.maxKeys {
			old := l.lru.Back()
			l.lru.Remove(old)
			delete(l.keys, old.Value.(*limiterEntry[K]).key)
		}
		e = &limiterEntry[K]{key: key, lim: rate.NewLimiter(l.limit, l.burst)}
		l.keys[key] = l.lru.PushFront(e)
	}
	r := e.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return nil, false, d
	}
	return r, true, 0
}

// len counts the buckets kept.
func (l *keyedLimiter[K]) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}
