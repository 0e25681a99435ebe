package storetest

import (
	"crypto/sha256"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

var pushN atomic.Int64

// pushIDs returns a fresh uaid (32 hex) and channel id (dashed UUID).
func pushIDs() (uaid, chid string) {
	n := pushN.Add(1)
	return fmt.Sprintf("%032x", n), fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n)
}

func newChannelID() string {
	_, chid := pushIDs()
	return chid
}

// pushSetup returns the store as a PushStore and a user agent with one
// channel registered.
func pushSetup(t *testing.T, newStore NewStoreFunc) (*bundle, store.PushStore, string, string) {
	t.Helper()
	b := setup(t, newStore)
	ps, ok := b.store.(store.PushStore)
	require.True(t, ok, "the store must implement store.PushStore")
	uaid, chid := pushIDs()
	require.NoError(t, ps.PushUserCreate(b.ctx, &store.PushUserCreateParams{UAID: uaid, NodeID: "node-a", ConnectedAt: 1000, Now: now}))
	require.NoError(t, ps.PushChannelAdd(b.ctx, &store.PushChannelAddParams{UAID: uaid, ChannelID: chid, Now: now}))
	return b, ps, uaid, chid
}

func pushMsg(uaid, chid string, ttl int, topic string) *store.PushMessage {
	return &store.PushMessage{
		ID: herald.NewID(herald.PrefixPushMessage), UAID: uaid, ChannelID: chid, Topic: topic,
		Data: []byte("payload " + topic), Headers: map[string]string{"encoding": "aes128gcm"},
		TTL: ttl, CreatedAt: now, ExpiresAt: now.Add(time.Duration(ttl) * time.Second),
	}
}

func listAll(t *testing.T, b *bundle, ps store.PushStore, uaid string, at time.Time) []*store.PushMessage {
	t.Helper()
	msgs, err := ps.PushMessageList(b.ctx, &store.PushMessageListParams{UAID: uaid, Now: at, Limit: 1000})
	require.NoError(t, err)
	return msgs
}

func ids(msgs []*store.PushMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func testPush(t *testing.T, newStore NewStoreFunc) {
	t.Run("UserCreateGetConflict", func(t *testing.T) {
		t.Parallel()
		b, ps, uaid, _ := pushSetup(t, newStore)
		u, err := ps.PushUserGet(b.ctx, uaid)
		require.NoError(t, err)
		require.Equal(t, &store.PushUser{UAID: uaid, NodeID: "node-a", ConnectedAt: 1000, LastConnect: now}, u)
		err = ps.PushUserCreate(b.ctx, &store.PushUserCreateParams{UAID: uaid, NodeID: "node-b", ConnectedAt: 2000, Now: now})
		require.ErrorIs(t, err, herald.ErrConflict)
		other, _ := pushIDs()
		_, err = ps.PushUserGet(b.ctx, other)
		require.ErrorIs(t, err, herald.ErrNotFound)
	})

	t.Run("ConnectIsOptimistic", func(t *testing.T) {
		t.Parallel()
		b, ps, uaid, _ := pushSetup(t, newStore)
		later := now.Add(time.Minute)
		require.NoError(t, ps.PushUserConnect(b.ctx, &store.PushUserConnectParams{UAID: uaid, NodeID: "node-b", ConnectedAt: 2000, Now: later}))
		u, err := ps.PushUserGet(b.ctx, uaid)
		require.NoError(t, err)
		require.Equal(t, "node-b", u.NodeID)
		require.Equal(t, int64(2000), u.ConnectedAt)
		require.Equal(t, later, u.LastConnect)
		// An older connection is refused and changes nothing.
		err = ps.PushUserConnect(b.ctx, &store.PushUserConnectParams{UAID: uaid, NodeID: "node-c", ConnectedAt: 1999, Now: later})
		require.ErrorIs(t, err, herald.ErrConflict)
		u, err = ps.PushUserGet(b.ctx, uaid)
		require.NoError(t, err)
		require.Equal(t, "node-b", u.NodeID)
		require.Equal(t, int64(2000), u.ConnectedAt)
		// One from the same millisecond is not older: it takes over.
		require.NoError(t, ps.PushUserConnect(b.ctx, &store.PushUserConnectParams{UAID: uaid, NodeID: "node-c", ConnectedAt: 2000, Now: later}))
		u, err = ps.PushUserGet(b.ctx, uaid)
		require.NoError(t, err)
		require.Equal(t, "node-c", u.NodeID)
		// A new session (Newer) of the same millisecond is refused: the
		// stamp is another session's.
		err = ps.PushUserConnect(b.ctx, &store.PushUserConnectParams{UAID: uaid, NodeID: "node-d", ConnectedAt: 2000, Now: later, Newer: true})
		require.ErrorIs(t, err, herald.ErrConflict)
		u, err = ps.PushUserGet(b.ctx, uaid)
		require.NoError(t, err)
		require.Equal(t, "node-c", u.NodeID)
		require.NoError(t, ps.PushUserConnect(b.ctx, &store.PushUserConnectParams{UAID: uaid, NodeID: "node-d", ConnectedAt: 2001, Now: later, Newer: true}))
		u, err = ps.PushUserGet(b.ctx, uaid)
		require.NoError(t, err)
		require.Equal(t, "node-d", u.NodeID)
		require.Equal(t, int64(2001), u.ConnectedAt)
		other, _ := pushIDs()
		for _, newer := range []bool{false, true} {
			err = ps.PushUserConnect(b.ctx, &store.PushUserConnectParams{UAID: other, NodeID: "node-c", ConnectedAt: 1, Now: later, Newer: newer})
			require.ErrorIs(t, err, herald.ErrNotFound)
		}
	})

	t.Run("DisconnectOnlyThatConnection", func(t *testing.T) {
		t.Parallel()
		b, ps, uaid, _ := pushSetup(t, newStore)
		for _, p := range []store.PushUserDisconnectParams{
			{UAID: uaid, NodeID: "node-a", ConnectedAt: 999},
			{UAID: uaid, NodeID: "node-b", ConnectedAt: 1000},
		} {
			ok, err := ps.PushUserDisconnect(b.ctx, &p)
			require.NoError(t, err)
			require.False(t, ok, "%+v must not clear another connection", p)
		}
		ok, err := ps.PushUserDisconnect(b.ctx, &store.PushUserDisconnectParams{UAID: uaid, NodeID: "node-a", ConnectedAt: 1000})
		require.NoError(t, err)
		require.True(t, ok)
		u, err := ps.PushUserGet(b.ctx, uaid)
		require.NoError(t, err)
		require.Empty(t, u.NodeID)
		require.Equal(t, int64(1000), u.ConnectedAt)
	})

	t.Run("ChannelsAndRoute", func(t *testing.T) {
		t.Parallel()
		b, ps, uaid, chid := pushSetup(t, newStore)
		r, err := ps.PushRouteGet(b.ctx, &store.PushRouteGetParams{UAID: uaid, ChannelID: chid})
		require.NoError(t, err)
		require.Equal(t, "node-a", r.NodeID)
		require.Equal(t, int64(1000), r.ConnectedAt)
		require.Nil(t, r.KeyHash)

		hash := sha256.Sum256([]byte("app server key"))
		require.NoError(t, ps.PushChannelAdd(b.ctx, &store.PushChannelAddParams{UAID: uaid, ChannelID: chid, KeyHash: hash[:], Now: now}))
		r, err = ps.PushRouteGet(b.ctx, &store.PushRouteGetParams{UAID: uaid, ChannelID: chid})
		require.NoError(t, err)
		require.Equal(t, hash[:], r.KeyHash, "registering again replaces the key hash")

		_, err = ps.PushRouteGet(b.ctx, &store.PushRouteGetParams{UAID: uaid, ChannelID: newChannelID()})
		require.ErrorIs(t, err, herald.ErrNotFound, "unregistered channel")
		other, _ := pushIDs()
		_, err = ps.PushRouteGet(b.ctx, &store.PushRouteGetParams{UAID: other, ChannelID: chid})
		require.ErrorIs(t, err, herald.ErrNotFound, "unknown user agent")
		err = ps.PushChannelAdd(b.ctx, &store.PushChannelAddParams{UAID: other, ChannelID: chid, Now: now})
		require.ErrorIs(t, err, herald.ErrNotFound, "no channel without its user agent")

		// Remove: reports existence, is idempotent, deletes the channel's
		// messages and only those.
		other2 := newChannelID()
		require.NoError(t, ps.PushChannelAdd(b.ctx, &store.PushChannelAddParams{UAID: uaid, ChannelID: other2, Now: now}))
		_, err = ps.PushMessageSave(b.ctx, &store.PushMessageSaveParams{UAID: uaid, Messages: []*store.PushMessage{
			pushMsg(uaid, chid, 60, ""), pushMsg(uaid, other2, 60, ""),
		}})
		require.NoError(t, err)
		ok, err := ps.PushChannelRemove(b.ctx, &store.PushChannelRemoveParams{UAID: uaid, ChannelID: chid})
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = ps.PushChannelRemove(b.ctx, &store.PushChannelRemoveParams{UAID: uaid, ChannelID: chid})
		require.NoError(t, err)
		require.False(t, ok)
		left := listAll(t, b, ps, uaid, now)
		require.Len(t, left, 1)
		require.Equal(t, other2, left[0].ChannelID)
		_, err = ps.PushRouteGet(b.ctx, &store.PushRouteGetParams{UAID: uaid, ChannelID: chid})
		require.ErrorIs(t, err, herald.ErrNotFound)
	})

	t.Run("MessagesSaveListDelete", func(t *testing.T) {
		t.Parallel()
		b, ps, uaid, chid := pushSetup(t, newStore)
		m1, m2 := pushMsg(uaid, chid, 60, ""), pushMsg(uaid, chid, 10, "")
		m2.Data, m2.Headers = nil, nil
		topic := pushMsg(uaid, chid, 60, "news")
		unknown := pushMsg(uaid, newChannelID(), 60, "")
		res, err := ps.PushMessageSave(b.ctx, &store.PushMessageSaveParams{UAID: uaid, Messages: []*store.PushMessage{m1, m2, topic, unknown}})
		require.NoError(t, err)
		require.Equal(t, []string{unknown.ID}, res.Unregistered)

		got := listAll(t, b, ps, uaid, now)
		require.Equal(t, []string{topic.ID, m1.ID, m2.ID}, ids(got), "topic messages first, then id order")
		require.Equal(t, m1, got[1], "read back as written")
		require.Nil(t, got[2].Data)
		require.Nil(t, got[2].Headers)
		require.Equal(t, "news", got[0].Topic)

		// Limit, and expiry: a message expiring exactly at Now is not
		// returned.
		page, err := ps.PushMessageList(b.ctx, &store.PushMessageListParams{UAID: uaid, Now: now, Limit: 2})
		require.NoError(t, err)
		require.Equal(t, []string{topic.ID, m1.ID}, ids(page))
		require.Equal(t, []string{topic.ID, m1.ID}, ids(listAll(t, b, ps, uaid, m2.ExpiresAt)))
		require.Empty(t, listAll(t, b, ps, uaid, now.Add(time.Hour)))

		// A new topic message replaces the stored one.
		topic2 := pushMsg(uaid, chid, 120, "news")
		topic2.Data = []byte("newer")
		_, err = ps.PushMessageSave(b.ctx, &store.PushMessageSaveParams{UAID: uaid, Messages: []*store.PushMessage{topic2}})
		require.NoError(t, err)
		got = listAll(t, b, ps, uaid, now)
		require.Equal(t, []string{topic2.ID, m1.ID, m2.ID}, ids(got))
		require.Equal(t, []byte("newer"), got[0].Data)
		require.Equal(t, 120, got[0].TTL)

		n, err := ps.PushMessageDelete(b.ctx, &store.PushMessageDeleteParams{UAID: uaid, IDs: []string{topic.ID, topic2.ID, m1.ID}})
		require.NoError(t, err)
		require.Equal(t, 2, n, "absent ids are ignored")
		require.Equal(t, []string{m2.ID}, ids(listAll(t, b, ps, uaid, now)))
		// Another user agent's ids are not touched.
		other, _ := pushIDs()
		n, err = ps.PushMessageDelete(b.ctx, &store.PushMessageDeleteParams{UAID: other, IDs: []string{m2.ID}})
		require.NoError(t, err)
		require.Zero(t, n)

		_, err = ps.PushMessageSave(b.ctx, &store.PushMessageSaveParams{UAID: other, Messages: []*store.PushMessage{pushMsg(other, chid, 60, "")}})
		require.ErrorIs(t, err, herald.ErrNotFound)
	})

	t.Run("UserDeleteCascades", func(t *testing.T) {
		t.Parallel()
		b, ps, uaid, chid := pushSetup(t, newStore)
		_, err := ps.PushMessageSave(b.ctx, &store.PushMessageSaveParams{UAID: uaid, Messages: []*store.PushMessage{pushMsg(uaid, chid, 60, "")}})
		require.NoError(t, err)
		require.NoError(t, ps.PushUserDelete(b.ctx, uaid))
		require.NoError(t, ps.PushUserDelete(b.ctx, uaid), "deleting again is fine")
		_, err = ps.PushUserGet(b.ctx, uaid)
		require.ErrorIs(t, err, herald.ErrNotFound)
		_, err = ps.PushRouteGet(b.ctx, &store.PushRouteGetParams{UAID: uaid, ChannelID: chid})
		require.ErrorIs(t, err, herald.ErrNotFound)
		require.Empty(t, listAll(t, b, ps, uaid, now))
		st, err := ps.PushStats(b.ctx)
		require.NoError(t, err)
		require.Equal(t, &store.PushStats{}, st)
	})

	t.Run("Broadcasts", func(t *testing.T) {
		t.Parallel()
		b, ps, _, _ := pushSetup(t, newStore)
		v, err := ps.PushBroadcastList(b.ctx)
		require.NoError(t, err)
		require.Empty(t, v)
		require.NoError(t, ps.PushBroadcastPut(b.ctx, &store.PushBroadcastPutParams{ID: "remote-settings/monitor_changes", Version: `"1"`, Now: now}))
		require.NoError(t, ps.PushBroadcastPut(b.ctx, &store.PushBroadcastPutParams{ID: "other", Version: "v1", Now: now}))
		require.NoError(t, ps.PushBroadcastPut(b.ctx, &store.PushBroadcastPutParams{ID: "other", Version: "v2", Now: now}))
		v, err = ps.PushBroadcastList(b.ctx)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"remote-settings/monitor_changes": `"1"`, "other": "v2"}, v)
	})

	t.Run("RetentionSweepIsBounded", func(t *testing.T) {
		t.Parallel()
		b, ps, uaid, chid := pushSetup(t, newStore)
		var msgs []*store.PushMessage
		for range 5 {
			msgs = append(msgs, pushMsg(uaid, chid, 1, ""))
		}
		keep := pushMsg(uaid, chid, 3600, "")
		msgs = append(msgs, keep)
		_, err := ps.PushMessageSave(b.ctx, &store.PushMessageSaveParams{UAID: uaid, Messages: msgs})
		require.NoError(t, err)
		// Three idle user agents (last connect before the cut) with a
		// message each, and the fresh one.
		var idle []string
		for i := range 3 {
			u, c := pushIDs()
			require.NoError(t, ps.PushUserCreate(b.ctx, &store.PushUserCreateParams{UAID: u, ConnectedAt: 1, Now: now.Add(-time.Duration(100+i) * 24 * time.Hour)}))
			require.NoError(t, ps.PushChannelAdd(b.ctx, &store.PushChannelAddParams{UAID: u, ChannelID: c, Now: now}))
			_, err := ps.PushMessageSave(b.ctx, &store.PushMessageSaveParams{UAID: u, Messages: []*store.PushMessage{pushMsg(u, c, 3600, "")}})
			require.NoError(t, err)
			idle = append(idle, u)
		}
		params := &store.PushRetentionSweepParams{Now: now.Add(time.Minute), IdleBefore: now.Add(-60 * 24 * time.Hour), Limit: 2}
		res, err := ps.PushRetentionSweep(b.ctx, params)
		require.NoError(t, err)
		require.Equal(t, &store.PushRetentionSweepResult{Messages: 2, Users: 2}, res)
		res, err = ps.PushRetentionSweep(b.ctx, params)
		require.NoError(t, err)
		require.Equal(t, &store.PushRetentionSweepResult{Messages: 2, Users: 1}, res)
		res, err = ps.PushRetentionSweep(b.ctx, params)
		require.NoError(t, err)
		require.Equal(t, &store.PushRetentionSweepResult{Messages: 1, Users: 0}, res)
		res, err = ps.PushRetentionSweep(b.ctx, params)
		require.NoError(t, err)
		require.Equal(t, &store.PushRetentionSweepResult{}, res)

		require.Equal(t, []string{keep.ID}, ids(listAll(t, b, ps, uaid, now)))
		for _, u := range idle {
			_, err := ps.PushUserGet(b.ctx, u)
			require.ErrorIs(t, err, herald.ErrNotFound)
		}
		st, err := ps.PushStats(b.ctx)
		require.NoError(t, err)
		require.Equal(t, &store.PushStats{Users: 1, Channels: 1, Messages: 1}, st)
	})
}
