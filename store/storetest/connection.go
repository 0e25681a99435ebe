package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Connections and subscription destinations (store/connection.go).

// newConnection returns a connection with every field set, not stored.
func newConnection(name string, mods ...func(*herald.Connection)) *herald.Connection {
	c := &herald.Connection{
		Name: name, Type: herald.DestinationAMQP, URL: "amqp://guest:s3cret@127.0.0.1:5672/vhost",
		TLS:       &herald.ConnectionTLS{CAFile: "/etc/ca.pem", ServerName: "rabbit.internal"},
		Tenants:   []string{"acme", "globex"},
		CreatedAt: now, UpdatedAt: now,
	}
	for _, mod := range mods {
		mod(c)
	}
	return c
}

func (b *bundle) createConnection(t *testing.T, c *herald.Connection) *herald.Connection {
	t.Helper()
	out, err := b.store.ConnectionCreate(b.ctx, &store.ConnectionCreateParams{Connection: c})
	require.NoError(t, err)
	return out
}

// destinations has one destination of every type but webhook, each naming
// connection "conn-<type>" when it uses one.
func destinations() []herald.Destination {
	ttl := 3600
	return []herald.Destination{
		{Type: herald.DestinationWebPush, Subscription: &herald.PushSubscription{
			Endpoint: "https://push.example.com/send/abc",
			Keys:     herald.PushKeys{P256DH: "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM", Auth: "tBHItJI5svbpez7KI4CCXg"},
		}, Urgency: "high", TTLS: &ttl, Topic: "t1"},
		{Type: herald.DestinationAMQP, Connection: "conn-amqp", Exchange: "events", RoutingKey: "bundle.indexed"},
		{Type: herald.DestinationNATS, Connection: "conn-nats", Subject: "herald.events"},
		{Type: herald.DestinationRedis, Connection: "conn-redis", Stream: "events", MaxLen: 100000},
		{Type: herald.DestinationMQTT, Connection: "conn-mqtt", Topic: "herald/events", Retain: true},
	}
}

func testConnection(t *testing.T, newStore NewStoreFunc) {
	t.Run("CreateGetUpdate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		want := newConnection("rabbit-main")
		got := b.createConnection(t, want)
		require.Equal(t, want, got)
		read, err := b.store.ConnectionGet(b.ctx, "rabbit-main")
		require.NoError(t, err)
		require.Equal(t, want, read)

		_, err = b.store.ConnectionCreate(b.ctx, &store.ConnectionCreateParams{Connection: newConnection("rabbit-main")})
		require.ErrorIs(t, err, herald.ErrConflict)

		upd := *read
		upd.URL = "amqps://guest:other@rabbit.internal:5671/"
		upd.TLS, upd.Tenants, upd.AllTenants = nil, nil, true
		upd.UpdatedAt = now.Add(time.Minute)
		upd.Type = herald.DestinationNATS // not mutable: ignored
		res, err := b.store.ConnectionUpdate(b.ctx, &store.ConnectionUpdateParams{Connection: &upd})
		require.NoError(t, err)
		wantUpd := *read
		wantUpd.URL, wantUpd.TLS, wantUpd.Tenants, wantUpd.AllTenants = upd.URL, nil, []string{}, true
		wantUpd.UpdatedAt = upd.UpdatedAt
		require.Equal(t, &wantUpd, res)
		read, err = b.store.ConnectionGet(b.ctx, "rabbit-main")
		require.NoError(t, err)
		require.Equal(t, &wantUpd, read)

		_, err = b.store.ConnectionGet(b.ctx, "nope")
		require.ErrorIs(t, err, herald.ErrNotFound)
		_, err = b.store.ConnectionUpdate(b.ctx, &store.ConnectionUpdateParams{Connection: newConnection("nope")})
		require.ErrorIs(t, err, herald.ErrNotFound)
		require.ErrorIs(t, b.store.ConnectionDelete(b.ctx, &store.ConnectionDeleteParams{Name: "nope"}), herald.ErrNotFound)

		require.NoError(t, b.store.ConnectionDelete(b.ctx, &store.ConnectionDeleteParams{Name: "rabbit-main"}))
		_, err = b.store.ConnectionGet(b.ctx, "rabbit-main")
		require.ErrorIs(t, err, herald.ErrNotFound)
	})

	t.Run("ListPages", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		// Byte order: upper case sorts before lower case, '-' before
		// digits.
		names := []string{"B", "a", "a-1", "a1", "b"}
		for _, n := range []string{"b", "a1", "B", "a-1", "a"} {
			b.createConnection(t, newConnection(n))
		}
		for _, limit := range []int{1, 2, 4, 5, 6} {
			var got []string
			after := ""
			for pages := 0; ; pages++ {
				require.Less(t, pages, 10)
				res, err := b.store.ConnectionList(b.ctx, &store.ConnectionListParams{Limit: limit, After: after})
				require.NoError(t, err)
				require.LessOrEqual(t, len(res.Connections), limit)
				for _, c := range res.Connections {
					require.Equal(t, "amqp://guest:s3cret@127.0.0.1:5672/vhost", c.URL)
					got = append(got, c.Name)
				}
				if !res.More {
					break
				}
				after = res.Connections[len(res.Connections)-1].Name
			}
			require.Equal(t, names, got, "limit %d", limit)
		}
		res, err := b.store.ConnectionList(b.ctx, &store.ConnectionListParams{})
		require.NoError(t, err)
		require.Len(t, res.Connections, 5)
		require.False(t, res.More)
	})

	t.Run("DeleteInUse", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createConnection(t, newConnection("conn-amqp"))
		dest := herald.Destination{Type: herald.DestinationAMQP, Connection: "conn-amqp", Exchange: "x"}
		s1 := b.createSub(t, func(s *herald.Subscription) { s.ID = "sub_b"; s.URL, s.Method, s.Destination = "", "", dest })
		s2 := b.createSub(t, func(s *herald.Subscription) { s.ID = "sub_a"; s.URL, s.Method, s.Destination = "", "", dest })

		err := b.store.ConnectionDelete(b.ctx, &store.ConnectionDeleteParams{Name: "conn-amqp"})
		require.ErrorIs(t, err, herald.ErrConflict)
		var inUse *store.ConnectionInUseError
		require.True(t, errors.As(err, &inUse), "%T", err)
		require.Equal(t, "sub_a", inUse.SubscriptionID)
		require.Contains(t, err.Error(), "sub_a")
		var he *herald.Error
		require.True(t, errors.As(err, &he))
		require.Equal(t, herald.CodeConflict, he.Code)
		require.Contains(t, he.Message, "sub_a")

		// A deleted subscription does not count; moving one to a webhook
		// frees the connection as well.
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: s2.ID, Now: now}))
		err = b.store.ConnectionDelete(b.ctx, &store.ConnectionDeleteParams{Name: "conn-amqp"})
		require.True(t, errors.As(err, &inUse), "%v", err)
		require.Equal(t, s1.ID, inUse.SubscriptionID)
		upd := *s1
		upd.Destination = herald.Destination{Type: herald.DestinationWebhook, URL: "https://example.com/h", Method: "PUT"}
		upd.URL, upd.Method = "https://example.com/h", "PUT"
		_, err = b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: &upd, Now: now})
		require.NoError(t, err)
		require.NoError(t, b.store.ConnectionDelete(b.ctx, &store.ConnectionDeleteParams{Name: "conn-amqp"}))
	})

	// A subscription write racing a delete of its connection: either the
	// delete sees the subscription (conflict) or the write finds the
	// connection gone, never both succeeding.
	t.Run("DeleteRacesSubscriptionCreate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		for i := range 20 {
			name := fmt.Sprintf("race-%d", i)
			b.createConnection(t, newConnection(name, func(c *herald.Connection) { c.Type = herald.DestinationNATS }))
			dest := herald.Destination{Type: herald.DestinationNATS, Connection: name}
			var subErr, delErr error
			var wg sync.WaitGroup
			wg.Go(func() {
				_, subErr = b.store.SubscriptionCreate(b.ctx, &store.SubscriptionCreateParams{
					Subscription: newSubscription(func(s *herald.Subscription) { s.URL, s.Method, s.Destination = "", "", dest }),
					Secret:       newSecret(), Now: now,
				})
			})
			wg.Go(func() { delErr = b.store.ConnectionDelete(b.ctx, &store.ConnectionDeleteParams{Name: name}) })
			wg.Wait()
			if delErr == nil {
				require.Error(t, subErr, "round %d: the connection was deleted and a subscription names it", i)
				require.Equal(t, herald.CodeInvalidField, herald.ErrorCode(subErr), "%v", subErr)
			} else {
				require.ErrorIs(t, delErr, herald.ErrConflict, "round %d", i)
				require.NoError(t, subErr, "round %d", i)
			}
		}
	})

	t.Run("SubscriptionNamesMissingConnection", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		dest := herald.Destination{Type: herald.DestinationNATS, Connection: "ghost", Subject: "a.b"}
		_, err := b.store.SubscriptionCreate(b.ctx, &store.SubscriptionCreateParams{
			Subscription: newSubscription(func(s *herald.Subscription) { s.URL, s.Method, s.Destination = "", "", dest }),
			Secret:       newSecret(), Now: now,
		})
		require.Equal(t, herald.CodeInvalidField, herald.ErrorCode(err), "%v", err)
		require.Contains(t, err.Error(), "ghost")

		sub := b.createSub(t)
		upd := *sub
		upd.URL, upd.Method, upd.Destination = "", "", dest
		_, err = b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: &upd, Now: now})
		require.Equal(t, herald.CodeInvalidField, herald.ErrorCode(err), "%v", err)
		got, err := b.store.SubscriptionGet(b.ctx, sub.ID)
		require.NoError(t, err)
		require.Equal(t, herald.DestinationWebhook, got.Destination.Type, "the failed update changed nothing")
	})

	t.Run("SubscriptionDestinations", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		for _, typ := range []herald.DestinationType{herald.DestinationAMQP, herald.DestinationNATS, herald.DestinationRedis, herald.DestinationMQTT} {
			b.createConnection(t, newConnection("conn-"+string(typ), func(c *herald.Connection) { c.Type = typ }))
		}
		// A webhook given only URL and Method reads back with its
		// Destination filled.
		hook := b.createSub(t, func(s *herald.Subscription) { s.ID = "sub_0" })
		require.Equal(t, herald.Destination{Type: herald.DestinationWebhook, URL: hook.URL, Method: "POST"}, hook.Destination)

		want := map[string]herald.Destination{hook.ID: hook.Destination}
		for i, d := range destinations() {
			sub := b.createSub(t, func(s *herald.Subscription) {
				s.ID = fmt.Sprintf("sub_%d", i+1)
				s.URL, s.Method, s.Destination = "", "", d
			})
			require.Equal(t, d, sub.Destination)
			require.Empty(t, sub.URL)
			want[sub.ID] = d
		}
		check := func(subs []*herald.Subscription) {
			t.Helper()
			require.Len(t, subs, len(want))
			for _, s := range subs {
				require.Equal(t, want[s.ID], s.Destination, s.ID)
			}
		}
		list, err := b.store.SubscriptionList(b.ctx, &store.SubscriptionListParams{})
		require.NoError(t, err)
		check(list.Subscriptions)
		all, err := b.store.SubscriptionListAll(b.ctx)
		require.NoError(t, err)
		check(all.Subscriptions)
		for id, d := range want {
			got, err := b.store.SubscriptionGet(b.ctx, id)
			require.NoError(t, err)
			require.Equal(t, d, got.Destination)
		}
		// Claims carry the destination to the sender.
		ids := make([]string, 0, len(want))
		for id := range want {
			ids = append(ids, id)
		}
		b.publish(t, now, ids...)
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.Len(t, claimed, len(want))
		for _, c := range claimed {
			require.Equal(t, want[c.Subscription.ID], c.Subscription.Destination, c.Subscription.ID)
		}

		// An update moves a subscription between types both ways.
		amqp, err := b.store.SubscriptionGet(b.ctx, "sub_2")
		require.NoError(t, err)
		upd := *amqp
		upd.Destination = want["sub_4"]
		res, err := b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: &upd, Now: now})
		require.NoError(t, err)
		require.Equal(t, want["sub_4"], res.Destination)
		upd = *res
		upd.URL, upd.Method = "https://example.com/back", "PUT"
		upd.Destination = herald.Destination{Type: herald.DestinationWebhook, URL: upd.URL, Method: upd.Method}
		res, err = b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: &upd, Now: now})
		require.NoError(t, err)
		require.Equal(t, upd.Destination, res.Destination)
		require.Equal(t, "https://example.com/back", res.URL)
		require.Equal(t, "PUT", res.Method)
		// The redis connection is free again (sub_4 still uses it).
		err = b.store.ConnectionDelete(b.ctx, &store.ConnectionDeleteParams{Name: "conn-amqp"})
		require.NoError(t, err, "no live subscription uses conn-amqp any more")
		err = b.store.ConnectionDelete(b.ctx, &store.ConnectionDeleteParams{Name: "conn-redis"})
		require.ErrorIs(t, err, herald.ErrConflict)
	})
}

// testConnectionURLSealed: a connection URL (it holds the broker
// password) is sealed at rest with the secrets' ring, opens only with it,
// and is stored in plain text without a ring.
func testConnectionURLSealed(t *testing.T, be *SecretsBackend) {
	a := testRing(t, 1)
	b := setupSecrets(t, be, a)
	const url = "redis://:hunter2@127.0.0.1:6379/0"
	b.createConnection(t, newConnection("r", func(c *herald.Connection) { c.Type, c.URL = herald.DestinationRedis, url }))
	raw := be.RawConnectionURLs()
	require.Len(t, raw, 1)
	require.NotContains(t, raw[0], "hunter2")
	require.True(t, strings.HasPrefix(raw[0], "enc:v1:"+a.PrimaryID()+":"), raw[0])
	c, err := b.store.ConnectionGet(b.ctx, "r")
	require.NoError(t, err)
	require.Equal(t, url, c.URL)

	// Another key cannot open it: the URL reads as "" (resolving it then
	// fails), the rest of the connection still reads.
	b.reopen(testRing(t, 2))
	c, err = b.store.ConnectionGet(b.ctx, "r")
	require.NoError(t, err)
	require.Empty(t, c.URL)
	require.Equal(t, herald.DestinationRedis, c.Type)

	// Updating it under a ring re-seals it.
	b.reopen(a)
	c, err = b.store.ConnectionGet(b.ctx, "r")
	require.NoError(t, err)
	c.URL = "redis://:other@127.0.0.1:6379/1"
	_, err = b.store.ConnectionUpdate(b.ctx, &store.ConnectionUpdateParams{Connection: c})
	require.NoError(t, err)
	raw = be.RawConnectionURLs()
	require.NotContains(t, raw[0], "other")
	c, err = b.store.ConnectionGet(b.ctx, "r")
	require.NoError(t, err)
	require.Equal(t, "redis://:other@127.0.0.1:6379/1", c.URL)

	// Key rotation: SecretKeyCounts counts the URL, ConnectionReseal
	// moves it to the ring's first key and leaves it readable.
	keeper := b.store.(store.SecretKeeper)
	counts, err := keeper.SecretKeyCounts(b.ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{a.PrimaryID(): 1}, counts)
	next := testRing(t, 3, 1)
	b.reopen(next)
	keeper = b.store.(store.SecretKeeper)
	res, err := keeper.ConnectionReseal(b.ctx)
	require.NoError(t, err)
	require.Equal(t, &store.ConnectionResealResult{Scanned: 1, Resealed: 1}, res)
	require.True(t, strings.HasPrefix(be.RawConnectionURLs()[0], "enc:v1:"+next.PrimaryID()+":"))
	counts, err = keeper.SecretKeyCounts(b.ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{next.PrimaryID(): 1}, counts)
	res, err = keeper.ConnectionReseal(b.ctx)
	require.NoError(t, err)
	require.Equal(t, &store.ConnectionResealResult{Scanned: 1}, res, "nothing left to do")
	b.reopen(testRing(t, 3))
	c, err = b.store.ConnectionGet(b.ctx, "r")
	require.NoError(t, err)
	require.Equal(t, "redis://:other@127.0.0.1:6379/1", c.URL)
	// A URL no key opens is named, not rewritten.
	b.reopen(testRing(t, 4))
	res, err = b.store.(store.SecretKeeper).ConnectionReseal(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"r"}, res.Unreadable)
	require.True(t, strings.HasPrefix(be.RawConnectionURLs()[0], "enc:v1:"+next.PrimaryID()+":"))
}
