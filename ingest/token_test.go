package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// A group commit holding publishes of a revoked token (store.WithTokenCheck,
// ADR 0035) fails only those: the other publishers in it, with a valid
// token or none, get their results, and nothing of the revoked token's is
// stored.
func TestGroupCommitIsolatesRevokedToken(t *testing.T) {
	t.Parallel()
	for _, b := range testdb.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			s := b.New(t)
			createSub(t, s, nil, nil, herald.SubscriptionEnabled)
			ctx := context.Background()
			token := func(c byte, id string) store.TokenCheck {
				hash := strings.Repeat(string(c), 64)
				require.NoError(t, s.APITokenCreate(ctx, &store.APITokenCreateParams{
					Hash: hash, ID: id, Name: id, Scopes: []string{"events:publish"}, Now: time.Now(),
				}))
				return store.TokenCheck{Hash: hash, ID: id}
			}
			valid, revoked := token('a', "tok_valid"), token('b', "tok_revoked")
			require.NoError(t, s.APITokenDelete(ctx, revoked.ID))
			rs := &refusingStore{Store: s}
			const n = 12
			ing := setup(t, rs, Config{MaxBatch: n, FlushInterval: time.Minute})

			errs := make([]error, n)
			evs := make([]*herald.Event, n)
			var wg sync.WaitGroup
			for i := range evs {
				evs[i] = &herald.Event{ID: fmt.Sprintf("ev-%d", i), Type: "a.b", Data: json.RawMessage(`{}`)}
				pctx := ctx
				switch i % 3 {
				case 0:
					pctx = store.WithTokenCheck(ctx, revoked)
				case 1:
					pctx = store.WithTokenCheck(ctx, valid)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if i == n-1 {
						_, errs[i] = ing.PublishMany(pctx, []*herald.Event{evs[i]})
						return
					}
					_, errs[i] = ing.PublishOne(pctx, evs[i])
				}()
			}
			waitOrFail(t, &wg, 60*time.Second, "publishers were not answered")
			for i, ev := range evs {
				_, getErr := s.EventGet(ctx, &store.EventGetParams{ID: ev.ID})
				if i%3 == 0 {
					require.ErrorIs(t, errs[i], store.ErrTokenGone, "publish %d of the revoked token", i)
					require.Equal(t, herald.CodeUnauthorized, herald.ErrorCode(errs[i]))
					require.ErrorIs(t, getErr, herald.ErrNotFound, "and is not stored")
					continue
				}
				require.NoError(t, errs[i], "publish %d shares a commit with a revoked token's", i)
				require.NoError(t, getErr)
			}
			require.Equal(t, n, rs.callSizes()[0], "all publishes were in one group commit first")
		})
	}
}
