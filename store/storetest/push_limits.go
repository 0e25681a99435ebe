package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// testPushLimits proves the disk caps of the push store (issue 20, item
// 5): messages per user agent and per channel, channels per user agent.
func testPushLimits(t *testing.T, newStore NewStoreFunc) {
	save := func(t *testing.T, b *bundle, ps store.PushStore, p store.PushMessageSaveParams) *store.PushMessageSaveResult {
		t.Helper()
		res, err := ps.PushMessageSave(b.ctx, &p)
		require.NoError(t, err)
		return res
	}

	t.Run("MessagesPerUAID", func(t *testing.T) {
		t.Parallel()
		b, ps, uaid, chid := pushSetup(t, newStore)
		chid2 := newChannelID()
		require.NoError(t, ps.PushChannelAdd(b.ctx, &store.PushChannelAddParams{UAID: uaid, ChannelID: chid2, Now: now}))
		// An expired message not yet swept still holds its row: it counts.
		expired := pushMsg(uaid, chid, 1, "")
		expired.CreatedAt, expired.ExpiresAt = now.Add(-2*time.Second), now.Add(-time.Second)
		save(t, b, ps, store.PushMessageSaveParams{UAID: uaid, Messages: []*store.PushMessage{expired}})
		var kept []string
		for i := range 4 {
			c := chid
			if i%2 == 1 {
				c = chid2
			}
			m := pushMsg(uaid, c, 60, "")
			res := save(t, b, ps, store.PushMessageSaveParams{UAID: uaid, Messages: []*store.PushMessage{m}, MaxPerUAID: 3})
			if i < 2 {
				require.Empty(t, res.OverLimit)
				kept = append(kept, m.ID)
			} else {
				require.Equal(t, []string{m.ID}, res.OverLimit, "message %d is beyond the cap", i)
			}
		}
		require.Equal(t, kept, ids(listAll(t, b, ps, uaid, now)))
		require.Len(t, listAll(t, b, ps, uaid, now.Add(-2*time.Second)), 3, "the expired one is still stored")

		// A topic message adds a row (refused at the cap) unless it
		// replaces one, which always passes.
		topic := pushMsg(uaid, chid, 60, "t")
		res := save(t, b, ps, store.PushMessageSaveParams{UAID: uaid, Messages: []*store.PushMessage{topic}, MaxPerUAID: 3})
		require.Equal(t, []string{topic.ID}, res.OverLimit)
		save(t, b, ps, store.PushMessageSaveParams{UAID: uaid, Messages: []*store.PushMessage{topic}})
		again := pushMsg(uaid, chid, 60, "t")
		res = save(t, b, ps, store.PushMessageSaveParams{UAID: uaid, Messages: []*store.PushMessage{again}, MaxPerUAID: 4})
		require.Empty(t, res.OverLimit, "a replacing topic message passes at the cap")
		msgs := listAll(t, b, ps, uaid, now)
		require.Len(t, msgs, 3)
		require.Equal(t, again.ID, msgs[0].ID)

		// Room made by an ack is room again.
		_, err := ps.PushMessageDelete(b.ctx, &store.PushMessageDeleteParams{UAID: uaid, IDs: kept[:1]})
		require.NoError(t, err)
		m := pushMsg(uaid, chid, 60, "")
		res = save(t, b, ps, store.PushMessageSaveParams{UAID: uaid, Messages: []*store.PushMessage{m}, MaxPerUAID: 4})
		require.Empty(t, res.OverLimit)
	})

	t.Run("MessagesPerChannel", func(t *testing.T) {
		t.Parallel()
		b, ps, uaid, chid := pushSetup(t, newStore)
		chid2 := newChannelID()
		require.NoError(t, ps.PushChannelAdd(b.ctx, &store.PushChannelAddParams{UAID: uaid, ChannelID: chid2, Now: now}))
		gone := newChannelID() // never registered
		a1, a2, a3 := pushMsg(uaid, chid, 60, ""), pushMsg(uaid, chid, 60, ""), pushMsg(uaid, chid, 60, "")
		b1, u1 := pushMsg(uaid, chid2, 60, ""), pushMsg(uaid, gone, 60, "")
		res := save(t, b, ps, store.PushMessageSaveParams{
			UAID: uaid, Messages: []*store.PushMessage{a1, a2, a3, b1, u1}, MaxPerUAID: 10, MaxPerChannel: 2,
		})
		require.Equal(t, []string{a3.ID}, res.OverLimit)
		require.Equal(t, []string{u1.ID}, res.Unregistered, "an unregistered channel is reported as such, not as over a cap")
		require.ElementsMatch(t, []string{a1.ID, a2.ID, b1.ID}, ids(listAll(t, b, ps, uaid, now)))
		// Without caps (a closing session's save) nothing is refused.
		res = save(t, b, ps, store.PushMessageSaveParams{UAID: uaid, Messages: []*store.PushMessage{a3}})
		require.Empty(t, res.OverLimit)
		require.Len(t, listAll(t, b, ps, uaid, now), 4)
	})

	t.Run("MessagesCapUnderConcurrency", func(t *testing.T) {
		t.Parallel()
		b, ps, uaid, chid := pushSetup(t, newStore)
		const senders, limit = 16, 5
		var wg sync.WaitGroup
		errs := make(chan error, senders)
		for range senders {
			wg.Go(func() {
				_, err := ps.PushMessageSave(b.ctx, &store.PushMessageSaveParams{
					UAID: uaid, Messages: []*store.PushMessage{pushMsg(uaid, chid, 60, "")}, MaxPerUAID: limit,
				})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Len(t, listAll(t, b, ps, uaid, now), limit, "concurrent saves never pass the cap together")
	})

	t.Run("ChannelCapUnderConcurrency", func(t *testing.T) {
		t.Parallel()
		b, ps, uaid, _ := pushSetup(t, newStore) // one channel already
		const registers, limit = 16, 5
		var wg sync.WaitGroup
		refused := make(chan error, registers)
		for range registers {
			wg.Go(func() {
				err := ps.PushChannelAdd(b.ctx, &store.PushChannelAddParams{UAID: uaid, ChannelID: newChannelID(), Now: now, MaxChannels: limit})
				if err != nil {
					refused <- err
				}
			})
		}
		wg.Wait()
		close(refused)
		n := 0
		for err := range refused {
			require.ErrorIs(t, err, store.ErrPushChannelLimit)
			n++
		}
		require.Equal(t, registers-(limit-1), n, "concurrent registers never pass the cap together")
	})

	t.Run("ChannelsPerUAID", func(t *testing.T) {
		t.Parallel()
		b, ps, uaid, chid := pushSetup(t, newStore) // one channel already
		chid2, chid3 := newChannelID(), newChannelID()
		add := func(c string, key []byte) error {
			return ps.PushChannelAdd(b.ctx, &store.PushChannelAddParams{UAID: uaid, ChannelID: c, KeyHash: key, Now: now, MaxChannels: 2})
		}
		require.NoError(t, add(chid2, nil))
		require.ErrorIs(t, add(chid3, nil), store.ErrPushChannelLimit)
		_, err := ps.PushRouteGet(b.ctx, &store.PushRouteGetParams{UAID: uaid, ChannelID: chid3})
		require.ErrorIs(t, err, herald.ErrNotFound, "a refused register changes nothing")
		// Registering a channel again is not a new one.
		require.NoError(t, add(chid2, []byte("key hash")))
		r, err := ps.PushRouteGet(b.ctx, &store.PushRouteGetParams{UAID: uaid, ChannelID: chid2})
		require.NoError(t, err)
		require.Equal(t, []byte("key hash"), r.KeyHash)
		// An unregister makes room.
		_, err = ps.PushChannelRemove(b.ctx, &store.PushChannelRemoveParams{UAID: uaid, ChannelID: chid})
		require.NoError(t, err)
		require.NoError(t, add(chid3, nil))
		// Unknown user agent: ErrNotFound, as without a cap.
		other, _ := pushIDs()
		err = ps.PushChannelAdd(b.ctx, &store.PushChannelAddParams{UAID: other, ChannelID: chid, Now: now, MaxChannels: 2})
		require.ErrorIs(t, err, herald.ErrNotFound)
	})
}
