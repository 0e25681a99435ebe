package storetest

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// manyBatch is larger than push's gatherers send in one statement (256),
// so the backends are proved past that size too.
const manyBatch = 300

// pushUsers stores n user agents connected to node-a at stamp 1000, each
// with one channel.
func pushUsers(t *testing.T, b *bundle, ps store.PushStore, n int) (uaids, chids []string) {
	t.Helper()
	for range n {
		uaid, chid := pushIDs()
		require.NoError(t, ps.PushUserCreate(b.ctx, &store.PushUserCreateParams{UAID: uaid, NodeID: "node-a", ConnectedAt: 1000, Now: now}))
		require.NoError(t, ps.PushChannelAdd(b.ctx, &store.PushChannelAddParams{UAID: uaid, ChannelID: chid, Now: now}))
		uaids, chids = append(uaids, uaid), append(chids, chid)
	}
	return uaids, chids
}

// testPushMany proves the batched forms of connect, list and delete: each
// item answered as its single call would answer it.
func testPushMany(t *testing.T, newStore NewStoreFunc) {
	t.Run("ConnectManyDecidesEachAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		ps := b.store.(store.PushStore)
		uaids, _ := pushUsers(t, b, ps, 4)
		absent, _ := pushIDs()
		later := now.Add(time.Minute)
		// uaids[1] is held by a newer connection, uaids[2] by one of the
		// same millisecond.
		require.NoError(t, ps.PushUserConnect(b.ctx, &store.PushUserConnectParams{UAID: uaids[1], NodeID: "node-z", ConnectedAt: 5000, Now: now}))
		require.NoError(t, ps.PushUserConnect(b.ctx, &store.PushUserConnectParams{UAID: uaids[2], NodeID: "node-y", ConnectedAt: 2000, Now: now}))
		res, err := ps.PushUserConnectMany(b.ctx, &store.PushUserConnectManyParams{Connects: []*store.PushUserConnectParams{
			{UAID: uaids[0], NodeID: "node-b", ConnectedAt: 2000, Now: later, Newer: true},
			{UAID: uaids[1], NodeID: "node-b", ConnectedAt: 2000, Now: later, Newer: true},
			{UAID: absent, NodeID: "node-b", ConnectedAt: 2000, Now: later, Newer: true},
			{UAID: uaids[2], NodeID: "node-b", ConnectedAt: 2000, Now: later, Newer: true},
			{UAID: uaids[3], NodeID: "node-c", ConnectedAt: 1000, Now: later}, // re-asserts its own stamp
		}})
		require.NoError(t, err)
		require.Len(t, res, 5)
		require.NoError(t, res[0].Err)
		require.ErrorIs(t, res[1].Err, herald.ErrConflict)
		require.Equal(t, "node-z", res[1].NodeID, "a refused item names the record it lost to")
		require.Equal(t, int64(5000), res[1].ConnectedAt)
		require.ErrorIs(t, res[2].Err, herald.ErrNotFound)
		require.ErrorIs(t, res[3].Err, herald.ErrConflict, "Newer refuses the same millisecond")
		require.Equal(t, "node-y", res[3].NodeID)
		require.Equal(t, int64(2000), res[3].ConnectedAt)
		require.NoError(t, res[4].Err)
		for uaid, want := range map[string]store.PushUser{
			uaids[0]: {NodeID: "node-b", ConnectedAt: 2000, LastConnect: later},
			uaids[1]: {NodeID: "node-z", ConnectedAt: 5000, LastConnect: now},
			uaids[2]: {NodeID: "node-y", ConnectedAt: 2000, LastConnect: now},
			uaids[3]: {NodeID: "node-c", ConnectedAt: 1000, LastConnect: later},
		} {
			u, err := ps.PushUserGet(b.ctx, uaid)
			require.NoError(t, err)
			want.UAID = uaid
			require.Equal(t, &want, u)
		}
		_, err = ps.PushUserGet(b.ctx, absent)
		require.ErrorIs(t, err, herald.ErrNotFound, "connect never creates")

		// A uaid twice in one batch is refused whole: nothing changes.
		_, err = ps.PushUserConnectMany(b.ctx, &store.PushUserConnectManyParams{Connects: []*store.PushUserConnectParams{
			{UAID: uaids[3], NodeID: "node-d", ConnectedAt: 9000, Now: later},
			{UAID: uaids[0], NodeID: "node-d", ConnectedAt: 9000, Now: later},
			{UAID: uaids[3], NodeID: "node-e", ConnectedAt: 9001, Now: later},
		}})
		require.Equal(t, herald.CodeInvalidField, herald.ErrorCode(err))
		u, err := ps.PushUserGet(b.ctx, uaids[0])
		require.NoError(t, err)
		require.Equal(t, "node-b", u.NodeID)
		res, err = ps.PushUserConnectMany(b.ctx, &store.PushUserConnectManyParams{})
		require.NoError(t, err)
		require.Empty(t, res)
	})

	t.Run("ConnectManyPastTheGatherSize", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		ps := b.store.(store.PushStore)
		uaids, _ := pushUsers(t, b, ps, manyBatch)
		connects := make([]*store.PushUserConnectParams, 0, manyBatch+1)
		for i, uaid := range uaids {
			stamp := int64(2000) // takes over
			if i%3 == 0 {
				stamp = 999 // older: refused
			}
			connects = append(connects, &store.PushUserConnectParams{UAID: uaid, NodeID: "node-b", ConnectedAt: stamp, Now: now, Newer: true})
		}
		absent, _ := pushIDs()
		connects = append(connects, &store.PushUserConnectParams{UAID: absent, NodeID: "node-b", ConnectedAt: 2000, Now: now, Newer: true})
		res, err := ps.PushUserConnectMany(b.ctx, &store.PushUserConnectManyParams{Connects: connects})
		require.NoError(t, err)
		require.Len(t, res, manyBatch+1)
		for i, uaid := range uaids {
			u, err := ps.PushUserGet(b.ctx, uaid)
			require.NoError(t, err)
			if i%3 == 0 {
				require.ErrorIs(t, res[i].Err, herald.ErrConflict, "item %d", i)
				require.Equal(t, "node-a", u.NodeID)
				require.Equal(t, int64(1000), res[i].ConnectedAt)
			} else {
				require.NoError(t, res[i].Err, "item %d", i)
				require.Equal(t, "node-b", u.NodeID)
			}
		}
		require.ErrorIs(t, res[manyBatch].Err, herald.ErrNotFound)
	})

	t.Run("ConnectManyConcurrentBatchesDoNotDeadlock", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		ps := b.store.(store.PushStore)
		uaids, _ := pushUsers(t, b, ps, 64)
		// Four writers, each connecting every user agent in its own order
		// with rising stamps: in any order of rows locked, batches over
		// the same rows must wait on each other, never fail.
		var wg sync.WaitGroup
		errs := make(chan error, 4*10)
		for w := range 4 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(w), 1))
				for round := range 10 {
					order := append([]string(nil), uaids...)
					r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
					connects := make([]*store.PushUserConnectParams, len(order))
					for i, uaid := range order {
						connects[i] = &store.PushUserConnectParams{
							UAID: uaid, NodeID: "node-w", ConnectedAt: int64(2000 + round*10 + w), Now: now, Newer: true,
						}
					}
					_, err := ps.PushUserConnectMany(b.ctx, &store.PushUserConnectManyParams{Connects: connects})
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for _, uaid := range uaids {
			u, err := ps.PushUserGet(b.ctx, uaid)
			require.NoError(t, err)
			require.Equal(t, int64(2000+9*10+3), u.ConnectedAt, "the newest stamp wins")
		}
	})

	t.Run("ListManyAsListEach", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		ps := b.store.(store.PushStore)
		uaids, chids := pushUsers(t, b, ps, manyBatch)
		for i, uaid := range uaids {
			var msgs []*store.PushMessage
			for k := range i % 4 { // 0–3 messages, one of them a topic one
				topic := ""
				if k == 1 {
					topic = "t"
				}
				msgs = append(msgs, pushMsg(uaid, chids[i], 10+k*50, topic))
			}
			if len(msgs) > 0 {
				_, err := ps.PushMessageSave(b.ctx, &store.PushMessageSaveParams{UAID: uaid, Messages: msgs})
				require.NoError(t, err)
			}
		}
		absent, _ := pushIDs()
		at := now.Add(20 * time.Second) // the first message of each (TTL 10 s) has expired
		// A uaid named twice is listed once.
		got, err := ps.PushMessageListMany(b.ctx, &store.PushMessageListManyParams{UAIDs: slices.Concat(uaids, []string{absent, uaids[3]}), Now: at, Limit: 1})
		require.NoError(t, err)
		all, err := ps.PushMessageListMany(b.ctx, &store.PushMessageListManyParams{UAIDs: uaids, Now: at, Limit: 10})
		require.NoError(t, err)
		listed := 0
		for _, uaid := range uaids {
			one, err := ps.PushMessageList(b.ctx, &store.PushMessageListParams{UAID: uaid, Now: at, Limit: 1})
			require.NoError(t, err)
			require.Equal(t, one, got[uaid], "Limit applies to each user agent")
			require.Equal(t, listAll(t, b, ps, uaid, at), all[uaid])
			listed += len(all[uaid])
		}
		require.Equal(t, manyBatch/4*(0+0+1+2), listed, "expired messages are not listed")
		_, ok := got[absent]
		require.False(t, ok, "a user agent with nothing stored is absent")
		got, err = ps.PushMessageListMany(b.ctx, &store.PushMessageListManyParams{Now: at})
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("DeleteManyCountsEachItem", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		ps := b.store.(store.PushStore)
		uaids, chids := pushUsers(t, b, ps, 3)
		stored := map[string][]string{}
		for i, uaid := range uaids {
			msgs := []*store.PushMessage{pushMsg(uaid, chids[i], 60, ""), pushMsg(uaid, chids[i], 60, "")}
			_, err := ps.PushMessageSave(b.ctx, &store.PushMessageSaveParams{UAID: uaid, Messages: msgs})
			require.NoError(t, err)
			stored[uaid] = ids(msgs)
		}
		u0, u1, u2 := uaids[0], uaids[1], uaids[2]
		n, err := ps.PushMessageDeleteMany(b.ctx, &store.PushMessageDeleteManyParams{Deletes: []*store.PushMessageDeleteParams{
			{UAID: u0, IDs: stored[u0]},
			{UAID: u1, IDs: []string{stored[u1][0], stored[u2][0]}}, // another user agent's id is not u1's
			{UAID: u2},
			{UAID: u1, IDs: []string{stored[u1][0]}}, // deleted by the item before: counted there
		}})
		require.NoError(t, err)
		require.Equal(t, []int{2, 1, 0, 0}, n)
		require.Empty(t, listAll(t, b, ps, u0, now))
		require.Equal(t, stored[u1][1:], ids(listAll(t, b, ps, u1, now)))
		require.Equal(t, stored[u2], ids(listAll(t, b, ps, u2, now)))
		n, err = ps.PushMessageDeleteMany(b.ctx, &store.PushMessageDeleteManyParams{})
		require.NoError(t, err)
		require.Empty(t, n)
	})
}
