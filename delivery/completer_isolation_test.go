package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// faultStore wraps a store and records every DeliveryCompleteMany call. It
// refuses a call (with a non-transient error, as a database refuses a bad
// row) when refuse says so for any of its outcomes, and fails the first
// unavailable calls as if the database were down.
type faultStore struct {
	store.Store
	refuse func(o *store.DeliveryOutcome) bool

	mu          sync.Mutex
	unavailable int
	calls       [][]string // delivery ids per call
}

var errRefusedRow = errors.New("injected: the database refused a row")

func (f *faultStore) DeliveryCompleteMany(ctx context.Context, p *store.DeliveryCompleteManyParams) (*store.DeliveryCompleteManyResult, error) {
	ids := make([]string, len(p.Outcomes))
	refused := false
	for i := range p.Outcomes {
		ids[i] = p.Outcomes[i].DeliveryID
		if f.refuse != nil && f.refuse(&p.Outcomes[i]) {
			refused = true
		}
	}
	f.mu.Lock()
	f.calls = append(f.calls, ids)
	down := f.unavailable > 0
	if down {
		f.unavailable--
	}
	f.mu.Unlock()
	switch {
	case down:
		return nil, fmt.Errorf("injected: %w", herald.ErrStoreUnavailable)
	case refused:
		return nil, errRefusedRow
	}
	return f.Store.DeliveryCompleteMany(ctx, p)
}

func (f *faultStore) callSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]int, len(f.calls))
	for i, c := range f.calls {
		out[i] = len(c)
	}
	return out
}

// hasNUL is what PostgreSQL refuses in a text column (SQLSTATE 22021).
func hasNUL(o *store.DeliveryOutcome) bool {
	return strings.Contains(o.Attempt.ErrorMessage, "\x00") || strings.Contains(o.Attempt.ResponseExcerpt, "\x00")
}

// claimedBatch publishes n events to one subscription and claims their
// deliveries for e's node, as the tier loop would.
func claimedBatch(t *testing.T, s store.Store, e *Engine, n int) []*store.ClaimedDelivery {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	_, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{
		Subscription: &herald.Subscription{
			ID: herald.NewID(herald.PrefixSubscription), URL: "https://user:pass@hooks.example/p?token=t0p", Method: "POST",
			Headers: map[string]string{}, Ordering: herald.OrderingNone, TimeoutMS: 1000,
			State: herald.SubscriptionEnabled, Metadata: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now,
		},
		Secret: webhook.NewSecret(), Now: now,
	})
	require.NoError(t, err)
	ing := ingest.New(ingest.Config{Store: s})
	ing.Start()
	events := make([]*herald.Event, n)
	for i := range events {
		events[i] = &herald.Event{Type: "a.b", Data: json.RawMessage(`{}`)}
	}
	_, err = ing.PublishMany(ctx, events)
	ing.Close()
	require.NoError(t, err)
	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
		Tier: 0, Limit: n, Now: time.Now().UTC().Truncate(time.Millisecond), LeaseOwner: e.cfg.NodeID,
		LeaseUntil: now.Add(time.Minute), LeaseMargin: time.Minute,
	})
	require.NoError(t, err)
	require.Len(t, claimed, n)
	return claimed
}

func testEngine(s store.Store) *Engine {
	return New(Config{
		Store: s, Tiers: Tiers{0, time.Minute}, Workers: 4,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

// pendingOf decides one attempt's outcome as the worker does.
func pendingOf(e *Engine, c *store.ClaimedDelivery, res webhook.Result) pending {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return pending{decision: decide(e.cfg.Tiers, c, e.cfg.NodeID, now, res, now), claimed: c, result: res}
}

// flushWithin runs one flush and fails the test if it does not return in
// time (a completer retrying a refused batch forever).
func flushWithin(t *testing.T, e *Engine, batch []pending) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.completer.flush(batch)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the completer did not finish a batch with one refused outcome: it is stuck on it")
	}
}

func deliveryOf(t *testing.T, s store.Store, id string) *store.DeliveryGetResult {
	t.Helper()
	got, err := s.DeliveryGet(context.Background(), id)
	require.NoError(t, err)
	return got
}

// maxCalls is the most transactions isolating one bad outcome in a batch of
// n may take: the batch, two halves per level down to the single one, and
// the single one written again cleaned.
func maxCalls(n int) int { return 1 + 2*bits.Len(uint(n-1)) + 1 }

// An outcome whose error message holds a NUL (PostgreSQL refuses it:
// 22021) is isolated: the other outcomes of its batch commit, the bad one
// is recorded with its texts cleaned, and the flush returns. On PostgreSQL
// the refusal is the database's own; SQLite accepts NUL, so there the store
// refuses it the same way by injection.
func TestCompleterIsolatesNULMessage(t *testing.T) {
	t.Parallel()
	for _, b := range testdb.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fs := &faultStore{Store: b.New(t)}
			if b.Name == "sqlite" {
				fs.refuse = hasNUL
			}
			e := testEngine(fs)
			claimed := claimedBatch(t, fs, e, 8)
			bad := 5
			batch := make([]pending, len(claimed))
			for i, c := range claimed {
				res := webhook.Result{Success: true, Status: 200, Excerpt: "ok"}
				if i == bad {
					res = webhook.Result{Class: herald.ErrorTLS, Status: 0,
						Message: "tls: x509: certificate is valid for evil\x00.example, not localhost",
						Excerpt: "a\x00\xffb"}
				}
				batch[i] = pendingOf(e, c, res)
			}
			flushWithin(t, e, batch)

			for i, c := range claimed {
				got := deliveryOf(t, fs, c.Delivery.ID)
				require.Len(t, got.Attempts, 1, "delivery %d: its attempt is recorded", i)
				if i != bad {
					require.Equal(t, herald.DeliveryDelivered, got.Delivery.State, "delivery %d", i)
					continue
				}
				require.Equal(t, herald.DeliveryPending, got.Delivery.State, "the bad one is a retry")
				require.Equal(t, 1, got.Delivery.Tier)
				require.Equal(t, "tls: x509: certificate is valid for evil\uFFFD.example, not localhost", got.Attempts[0].ErrorMessage)
				require.Equal(t, "a\uFFFD\uFFFDb", got.Attempts[0].ResponseExcerpt)
			}
			sizes := fs.callSizes()
			require.Equal(t, 8, sizes[0], "all outcomes were tried in one batch first")
			require.LessOrEqual(t, len(sizes), maxCalls(8), "calls: %v", sizes)
		})
	}
}

// An outcome the store refuses whatever its texts is dropped after it was
// isolated: the rest commit, the flush returns, and the dropped delivery is
// left in flight for its lease to expire (it is attempted again).
func TestCompleterDropsOutcomeRefusedAlone(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		fs := &faultStore{Store: s}
		e := testEngine(fs)
		claimed := claimedBatch(t, fs, e, 11)
		poisoned := claimed[2].Delivery.ID
		fs.refuse = func(o *store.DeliveryOutcome) bool { return o.DeliveryID == poisoned }
		batch := make([]pending, len(claimed))
		for i, c := range claimed {
			res := webhook.Result{Success: true, Status: 200}
			if i == 2 {
				res = webhook.Result{Class: herald.ErrorHTTPStatus, Status: 500, Message: "500 Internal Server Error\x00"}
			}
			batch[i] = pendingOf(e, c, res)
		}
		flushWithin(t, e, batch)

		for i, c := range claimed {
			got := deliveryOf(t, fs, c.Delivery.ID)
			if c.Delivery.ID == poisoned {
				require.Equal(t, herald.DeliveryInFlight, got.Delivery.State, "dropped: left to lease expiry")
				require.Empty(t, got.Attempts)
				continue
			}
			require.Equal(t, herald.DeliveryDelivered, got.Delivery.State, "delivery %d", i)
		}
		sizes := fs.callSizes()
		require.Equal(t, 11, sizes[0])
		require.LessOrEqual(t, len(sizes), maxCalls(11), "calls: %v", sizes)
	})
}

// A store that is only unavailable is not a bad batch: the same batch is
// retried whole until it commits, never split.
func TestCompleterRetriesUnavailableStoreWhole(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		fs := &faultStore{Store: s, unavailable: 3}
		e := testEngine(fs)
		claimed := claimedBatch(t, fs, e, 6)
		batch := make([]pending, len(claimed))
		for i, c := range claimed {
			batch[i] = pendingOf(e, c, webhook.Result{Success: true, Status: 200})
		}
		flushWithin(t, e, batch)
		for _, c := range claimed {
			require.Equal(t, herald.DeliveryDelivered, deliveryOf(t, fs, c.Delivery.ID).Delivery.State)
		}
		require.Equal(t, []int{6, 6, 6, 6}, fs.callSizes())
	})
}
