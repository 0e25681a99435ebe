package destination_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/webhook"
)

// fakeSess is a session of the fake dialer.
type fakeSess struct {
	url     string
	dead    atomic.Bool
	retired chan struct{}
	once    sync.Once
}

// fakeDialer counts dials; a dial of a URL in fail fails, one in block
// waits for its channel.
type fakeDialer struct {
	dials atomic.Int32
	mu    sync.Mutex
	fail  map[string]bool
	block map[string]chan struct{}
}

func (f *fakeDialer) dial(conn *herald.Connection) (*fakeSess, error) {
	f.dials.Add(1)
	f.mu.Lock()
	fail, block := f.fail[conn.URL], f.block[conn.URL]
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	if fail {
		return nil, errors.New("refused")
	}
	return &fakeSess{url: conn.URL, retired: make(chan struct{})}, nil
}

func newPool(f *fakeDialer, backoff bool, idle time.Duration) *destination.Pool[*fakeSess] {
	cfg := destination.PoolConfig[*fakeSess]{
		Kind: "fake",
		Dial: f.dial,
		DialFailure: func(name string, err error) webhook.Result {
			return webhook.Result{Class: herald.ErrorConnection, Message: name + ": " + err.Error()}
		},
		Alive:         func(s *fakeSess) bool { return !s.dead.Load() },
		Retire:        func(s *fakeSess) { s.once.Do(func() { close(s.retired) }) },
		IdleClose:     idle,
		ClosedMessage: "closed",
	}
	if backoff {
		cfg.BackoffMin, cfg.BackoffMax = time.Hour, time.Hour
	}
	return destination.NewPool(cfg)
}

func conn(name, url string) *herald.Connection { return &herald.Connection{Name: name, URL: url} }

func waitRetired(t *testing.T, s *fakeSess) {
	t.Helper()
	select {
	case <-s.retired:
	case <-time.After(5 * time.Second):
		t.Fatal("session not retired")
	}
}

// Concurrent Gets of one connection share one dial and one session;
// another connection has its own.
func TestPoolDialsOnce(t *testing.T) {
	f := &fakeDialer{block: map[string]chan struct{}{"u": make(chan struct{})}}
	p := newPool(f, false, 0)
	defer p.Close()
	const n = 10
	got := make(chan *fakeSess, n)
	for range n {
		go func() {
			s, fail := p.Get(context.Background(), conn("a", "u"))
			if fail != nil {
				t.Error(fail.Message)
			}
			got <- s
		}()
	}
	require.Eventually(t, func() bool { return f.dials.Load() == 1 }, 5*time.Second, time.Millisecond)
	close(f.block["u"])
	first := <-got
	for range n - 1 {
		require.Same(t, first, <-got)
	}
	require.EqualValues(t, 1, f.dials.Load())
	other, fail := p.Get(context.Background(), conn("b", "u"))
	require.Nil(t, fail)
	require.NotSame(t, first, other)
	require.Equal(t, 2, p.Len())
}

// A dial that hangs holds only the Gets of its connection, each until its
// context ends.
func TestPoolHangingDial(t *testing.T) {
	f := &fakeDialer{block: map[string]chan struct{}{"hang": make(chan struct{})}}
	p := newPool(f, false, 0)
	defer close(f.block["hang"])
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, fail := p.Get(ctx, conn("a", "hang"))
	require.NotNil(t, fail)
	require.Equal(t, herald.ErrorTimeout, fail.Class)
	_, fail = p.Get(context.Background(), conn("b", "ok"))
	require.Nil(t, fail)
}

// A failed dial is not repeated during the backoff for the same settings:
// attempts fail at once with its result; new settings dial at once.
func TestPoolBackoff(t *testing.T) {
	f := &fakeDialer{fail: map[string]bool{"bad": true}}
	p := newPool(f, true, 0)
	defer p.Close()
	_, fail := p.Get(context.Background(), conn("a", "bad"))
	require.NotNil(t, fail)
	require.Equal(t, "a: refused", fail.Message)
	_, fail = p.Get(context.Background(), conn("a", "bad"))
	require.NotNil(t, fail)
	require.Equal(t, herald.ErrorConnection, fail.Class)
	require.Contains(t, fail.Message, "next dial after backoff")
	require.EqualValues(t, 1, f.dials.Load())
	s, fail := p.Get(context.Background(), conn("a", "good"))
	require.Nil(t, fail)
	require.Equal(t, "good", s.url)
	require.EqualValues(t, 2, f.dials.Load())

	// Without a backoff every attempt dials.
	f2 := &fakeDialer{fail: map[string]bool{"bad": true}}
	p2 := newPool(f2, false, 0)
	defer p2.Close()
	for range 3 {
		_, fail = p2.Get(context.Background(), conn("a", "bad"))
		require.Equal(t, "a: refused", fail.Message)
	}
	require.EqualValues(t, 3, f2.dials.Load())
}

// A change of URL or TLS settings, or a dead session, redials and retires
// the old session.
func TestPoolRedial(t *testing.T) {
	f := &fakeDialer{}
	p := newPool(f, true, 0)
	defer p.Close()
	s1, fail := p.Get(context.Background(), conn("a", "u1"))
	require.Nil(t, fail)
	s, _ := p.Get(context.Background(), conn("a", "u1"))
	require.Same(t, s1, s)

	s2, fail := p.Get(context.Background(), conn("a", "u2"))
	require.Nil(t, fail)
	require.Equal(t, "u2", s2.url)
	waitRetired(t, s1)

	withTLS := conn("a", "u2")
	withTLS.TLS = &herald.ConnectionTLS{ServerName: "x"}
	s3, fail := p.Get(context.Background(), withTLS)
	require.Nil(t, fail)
	require.NotSame(t, s2, s3)
	waitRetired(t, s2)

	s3.dead.Store(true)
	s4, fail := p.Get(context.Background(), withTLS)
	require.Nil(t, fail)
	require.NotSame(t, s3, s4)
	waitRetired(t, s3)
	require.EqualValues(t, 4, f.dials.Load())
}

// Sessions unused for IdleClose are retired at the next Get (the sweep runs
// at most once a minute).
func TestPoolIdleClose(t *testing.T) {
	f := &fakeDialer{}
	p := newPool(f, false, 10*time.Minute)
	defer p.Close()
	now := time.Now()
	p.SetNow(func() time.Time { return now })
	idle, _ := p.Get(context.Background(), conn("idle", "u"))
	_, _ = p.Get(context.Background(), conn("busy", "u"))
	require.Equal(t, 2, p.Len())
	now = now.Add(9 * time.Minute)
	_, _ = p.Get(context.Background(), conn("busy", "u"))
	require.Equal(t, 2, p.Len())
	now = now.Add(2 * time.Minute)
	_, _ = p.Get(context.Background(), conn("busy", "u"))
	require.Equal(t, 1, p.Len())
	waitRetired(t, idle)
}

// Close shuts every session; later Gets fail, and a dial that finishes
// after Close shuts what it opened.
func TestPoolClose(t *testing.T) {
	f := &fakeDialer{block: map[string]chan struct{}{"slow": make(chan struct{})}}
	p := newPool(f, false, 0)
	s, fail := p.Get(context.Background(), conn("a", "u"))
	require.Nil(t, fail)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, fail = p.Get(ctx, conn("b", "slow"))
	require.NotNil(t, fail)
	p.Close()
	waitRetired(t, s)
	_, fail = p.Get(context.Background(), conn("a", "u"))
	require.NotNil(t, fail)
	require.Equal(t, herald.ErrorConnection, fail.Class)
	require.Equal(t, "closed", fail.Message)
	require.Equal(t, 0, p.Len())
	close(f.block["slow"])
}

// An attempt's timeout is the subscription's, the default when unset,
// never above the maximum.
func TestTimeout(t *testing.T) {
	require.Equal(t, herald.DefaultTimeout, destination.Timeout(&webhook.Request{}))
	require.Equal(t, time.Second, destination.Timeout(&webhook.Request{Timeout: time.Second}))
	require.Equal(t, herald.MaxTimeout, destination.Timeout(&webhook.Request{Timeout: herald.MaxTimeout + time.Hour}))
}
