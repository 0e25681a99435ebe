package herald

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidatePushSubscription(t *testing.T) {
	t.Parallel()
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	require.NoError(t, err)
	p256dh := base64.RawURLEncoding.EncodeToString(key.PublicKey().Bytes())
	auth := base64.RawURLEncoding.EncodeToString(make([]byte, 16))
	offCurve := make([]byte, 65)
	offCurve[0], offCurve[64] = 4, 1
	ok := func(mod func(*PushSubscription)) *PushSubscription {
		ps := &PushSubscription{Endpoint: "https://push.example.com/x", Keys: PushKeys{P256DH: p256dh, Auth: auth}}
		mod(ps)
		return ps
	}
	require.NoError(t, ValidatePushSubscription(ok(func(*PushSubscription) {}), false))
	require.NoError(t, ValidatePushSubscription(ok(func(ps *PushSubscription) { ps.Keys.Auth += "==" }), false), "padding accepted")
	require.NoError(t, ValidatePushSubscription(ok(func(ps *PushSubscription) { ps.Endpoint = "http://127.0.0.1:1/x" }), true))
	for _, tt := range []struct {
		name, field string
		mod         func(*PushSubscription)
	}{
		{"http without dev", "endpoint", func(ps *PushSubscription) { ps.Endpoint = "http://push.example.com/x" }},
		{"other scheme", "endpoint", func(ps *PushSubscription) { ps.Endpoint = "ftp://push.example.com/x" }},
		{"no host", "endpoint", func(ps *PushSubscription) { ps.Endpoint = "https:///x" }},
		{"empty endpoint", "endpoint", func(ps *PushSubscription) { ps.Endpoint = "" }},
		{"p256dh not base64", "keys.p256dh", func(ps *PushSubscription) { ps.Keys.P256DH = "!!" }},
		{"p256dh short", "keys.p256dh", func(ps *PushSubscription) { ps.Keys.P256DH = p256dh[:40] }},
		{"p256dh off curve", "keys.p256dh", func(ps *PushSubscription) {
			ps.Keys.P256DH = base64.RawURLEncoding.EncodeToString(offCurve)
		}},
		{"p256dh missing", "keys.p256dh", func(ps *PushSubscription) { ps.Keys.P256DH = "" }},
		{"auth 15 bytes", "keys.auth", func(ps *PushSubscription) {
			ps.Keys.Auth = base64.RawURLEncoding.EncodeToString(make([]byte, 15))
		}},
		{"auth missing", "keys.auth", func(ps *PushSubscription) { ps.Keys.Auth = "" }},
	} {
		err := ValidatePushSubscription(ok(tt.mod), false)
		require.Error(t, err, tt.name)
		var he *Error
		require.ErrorAs(t, err, &he, tt.name)
		require.Equal(t, tt.field, he.Field, tt.name)
	}
}

func TestDestinationNameChecks(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckNATSSubject("herald.bundle.indexed"))
	for _, s := range []string{"", "a..b", ".a", "a.", "a.*", "a.>", "a b", "a\x01"} {
		require.Error(t, CheckNATSSubject(s), "%q", s)
	}
	require.NoError(t, CheckMQTTTopic("herald/bundle/indexed"))
	for _, s := range []string{"", "a/+/b", "a/#", "$SYS/x", "a\x00"} {
		require.Error(t, CheckMQTTTopic(s), "%q", s)
	}
	require.NoError(t, CheckAMQPExchange(""))
	require.NoError(t, CheckAMQPExchange("amq.topic"))
	require.Error(t, CheckAMQPExchange("a b"))
	require.Error(t, CheckRedisStream(""))
	require.NoError(t, CheckPushTopic("abc-_09"))
	require.Error(t, CheckPushTopic("a b"))
	require.True(t, ValidConnectionName("rabbit-main"))
	require.False(t, ValidConnectionName("-x"))
	require.False(t, ValidConnectionName("a/b"))
}

func TestCheckConnectionURL(t *testing.T) {
	t.Parallel()
	for typ, good := range map[DestinationType][]string{
		DestinationAMQP:  {"amqp://guest:guest@127.0.0.1:5672/", "amqps://h/"},
		DestinationNATS:  {"nats://127.0.0.1:4222", "tls://h:4222"},
		DestinationRedis: {"redis://127.0.0.1:6379/0", "rediss://:p@h:6380"},
		DestinationMQTT:  {"mqtt://127.0.0.1:1883", "mqtts://h", "tcp://h:1883", "ssl://h:8883"},
	} {
		for _, u := range good {
			require.NoError(t, CheckConnectionURL(typ, u), u)
		}
	}
	err := CheckConnectionURL(DestinationAMQP, "redis://127.0.0.1:6379")
	require.ErrorContains(t, err, "amqp://, amqps://")
	require.Error(t, CheckConnectionURL(DestinationNATS, "nats://"))
	require.Error(t, CheckConnectionURL(DestinationWebhook, "https://x"))
	err = CheckConnectionURL(DestinationAMQP, "amqp://u:pa ss%zz@h")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "pa ss", "the password is never in a message")
}
