package push

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

const (
	testUAID = "0123456789abcdef0123456789abcdef"
	testChid = "6a1d0c2e-7f3b-4c5d-9e8f-0a1b2c3d4e5f"
)

func mustKeys(t testing.TB, s string) *Keys {
	t.Helper()
	k, err := ParseKeys(s)
	require.NoError(t, err)
	return k
}

func requirePushErr(t *testing.T, err error, status, errno int) {
	t.Helper()
	var pe *Error
	require.True(t, errors.As(err, &pe), "want *Error, got %v", err)
	require.Equal(t, status, pe.Status, pe.Message)
	require.Equal(t, errno, pe.Errno, pe.Message)
}

func TestParseKeys(t *testing.T) {
	t.Parallel()
	k1, k2 := GenerateKey(), GenerateKey()
	for _, s := range []string{k1, k1 + "," + k2, "[" + k1 + ", " + k2 + "]", ` [ "` + k1 + `" ] `} {
		_, err := ParseKeys(s)
		require.NoError(t, err, s)
	}
	for _, s := range []string{"", "[]", "not-a-key", k1 + ",short", base64.URLEncoding.EncodeToString(make([]byte, 31))} {
		_, err := ParseKeys(s)
		require.Error(t, err, s)
	}
}

func TestEndpointTokens(t *testing.T) {
	t.Parallel()
	old, cur := GenerateKey(), GenerateKey()
	k := mustKeys(t, old)
	hash := sha256.Sum256([]byte("key"))

	v1, err := k.EndpointToken(&Endpoint{UAID: testUAID, ChannelID: testChid})
	require.NoError(t, err)
	require.Len(t, v1, 140, "autopush's v1 length")
	require.NotContains(t, v1, "=")
	v2, err := k.EndpointToken(&Endpoint{UAID: testUAID, ChannelID: testChid, KeyHash: hash[:]})
	require.NoError(t, err)
	require.Len(t, v2, 183, "autopush's v2 length")

	// Rotation: the old key is second now and still decrypts.
	rotated := mustKeys(t, cur+","+old)
	for _, c := range []struct {
		tok     string
		version int
		want    *Endpoint
	}{
		{v1, 1, &Endpoint{UAID: testUAID, ChannelID: testChid}},
		{v1, 0, &Endpoint{UAID: testUAID, ChannelID: testChid}},
		{v2, 2, &Endpoint{UAID: testUAID, ChannelID: testChid, KeyHash: hash[:]}},
	} {
		got, err := rotated.ParseEndpointToken(c.tok, c.version)
		require.NoError(t, err)
		require.Equal(t, c.want, got)
	}
	unknown := mustKeys(t, cur)
	for name, c := range map[string]struct {
		k       *Keys
		tok     string
		version int
	}{
		"unknown key":     {unknown, v1, 1},
		"v1 as v2":        {k, v1, 2},
		"v2 as v1":        {k, v2, 1},
		"bad version":     {k, v1, 3},
		"truncated":       {k, v1[:100], 1},
		"flipped":         {k, v1[:50] + flip(v1[50]) + v1[51:], 1},
		"not base64":      {k, strings.Repeat("!", 140), 1},
		"empty":           {k, "", 1},
		"huge":            {k, strings.Repeat("A", 5000), 1},
		"std base64 char": {k, strings.Repeat("+", 140), 1},
	} {
		_, err := c.k.ParseEndpointToken(c.tok, c.version)
		require.Error(t, err, name)
		requirePushErr(t, err, 404, ErrnoInvalidToken)
	}
	_, err = k.EndpointToken(&Endpoint{UAID: "nothex", ChannelID: testChid})
	require.Error(t, err)
}

func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

func TestMessageIDs(t *testing.T) {
	t.Parallel()
	k := mustKeys(t, GenerateKey())
	for _, r := range []*MessageRef{
		{UAID: testUAID, ChannelID: testChid, ID: "pm_01abc"},
		{UAID: testUAID, ChannelID: testChid, ID: "pm_01abc", Topic: "news-1"},
	} {
		s, err := k.MessageID(r)
		require.NoError(t, err)
		got, err := k.ParseMessageID(s)
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
	_, err := k.MessageID(&MessageRef{UAID: testUAID, ChannelID: testChid, ID: "a:b"})
	require.Error(t, err)
	tok, err := k.EndpointToken(&Endpoint{UAID: testUAID, ChannelID: testChid})
	require.NoError(t, err)
	_, err = k.ParseMessageID(tok)
	requirePushErr(t, err, 404, ErrnoInvalidToken)
}

func TestInternalToken(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, b := GenerateKey(), GenerateKey()
	ka, kab, kb := mustKeys(t, a), mustKeys(t, b+","+a), mustKeys(t, b)
	require.True(t, kab.CheckInternalToken(ka.InternalToken(now), now), "a node still on the old first key is accepted")
	require.True(t, ka.CheckInternalToken(ka.InternalToken(now), now))
	require.False(t, kb.CheckInternalToken(ka.InternalToken(now), now), "a key removed from the configuration is refused")
	require.False(t, ka.CheckInternalToken("", now))
}

// TestInternalTokenBoundToTime (issue 20, item 15d): a node-to-node bearer
// seen on the wire (the internal listener speaks plain HTTP) is refused
// once it is older, or newer, than InternalTokenWindow; it was a static
// HMAC, valid for as long as its key was configured.
func TestInternalTokenBoundToTime(t *testing.T) {
	t.Parallel()
	k := mustKeys(t, GenerateKey())
	issued := time.Now()
	tok := k.InternalToken(issued)
	require.True(t, k.CheckInternalToken(tok, issued.Add(InternalTokenWindow-time.Second)))
	require.True(t, k.CheckInternalToken(tok, issued.Add(-InternalTokenWindow+time.Second)), "a receiver's clock a little behind")
	require.False(t, k.CheckInternalToken(tok, issued.Add(InternalTokenWindow+time.Second)), "a replayed bearer")
	require.False(t, k.CheckInternalToken(tok, issued.Add(-InternalTokenWindow-time.Second)))
	require.NotEqual(t, tok, k.InternalToken(issued.Add(2*time.Second)), "the bearer changes with time")
	// The time is authenticated: moving it forward breaks the MAC.
	ts, mac, ok := strings.Cut(tok, ".")
	require.True(t, ok)
	sec, err := strconv.ParseInt(ts, 10, 64)
	require.NoError(t, err)
	later := issued.Add(10 * time.Minute)
	require.False(t, k.CheckInternalToken(strconv.FormatInt(sec+600, 10)+"."+mac, later))
	for _, bad := range []string{"x", "." + mac, ts + ".", "+" + ts + "." + mac, ts + ".!!"} {
		require.False(t, k.CheckInternalToken(bad, issued), bad)
	}
}

func TestParseSendHeaders(t *testing.T) {
	t.Parallel()
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	ok := []struct {
		name string
		h    http.Header
		body bool
		want *SendHeaders
	}{
		{"no body", h("TTL", "60"), false, &SendHeaders{TTL: 60}},
		{"ttl 0", h("TTL", "0"), false, &SendHeaders{TTL: 0}},
		{"capped", h("TTL", "99999999"), false, &SendHeaders{TTL: MaxTTL}},
		{"overflow", h("TTL", "99999999999999999999999"), false, &SendHeaders{TTL: MaxTTL}},
		{"topic", h("TTL", "1", "Topic", "abc-_9=="), false, &SendHeaders{TTL: 1, Topic: "abc-_9=="}},
		{"aes128gcm", h("TTL", "5", "Content-Encoding", "aes128gcm", "Urgency", "high"), true,
			&SendHeaders{TTL: 5, Crypto: map[string]string{"encoding": "aes128gcm"}}},
		{"aesgcm", h("TTL", "5", "Content-Encoding", "aesgcm", "Encryption", `keyid="p256dh";salt="XZwpw6o37R-6qoZjw6KwAw=="`,
			"Crypto-Key", `keyid="p256dh";dh="BDgp=";p256ecdsa="BA1Hxz"`), true,
			&SendHeaders{TTL: 5, Crypto: map[string]string{"encoding": "aesgcm", "encryption": "keyid=p256dh;salt=XZwpw6o37R-6qoZjw6KwAw",
				"crypto_key": "keyid=p256dh;dh=BDgp"}}},
		{"aesgcm no crypto-key", h("TTL", "5", "Content-Encoding", "aesgcm", "Encryption", "salt=abc"), true,
			&SendHeaders{TTL: 5, Crypto: map[string]string{"encoding": "aesgcm", "encryption": "salt=abc"}}},
		{"crypto headers dropped without a body", h("TTL", "5", "Content-Encoding", "bogus"), false, &SendHeaders{TTL: 5}},
	}
	for _, c := range ok {
		got, err := ParseSendHeaders(c.h, c.body)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, got, c.name)
	}
	bad := []struct {
		name  string
		h     http.Header
		body  bool
		errno int
	}{
		{"no ttl", h(), false, ErrnoMissingTTL},
		{"negative", h("TTL", "-1"), false, ErrnoInvalidTTL},
		{"not a number", h("TTL", "soon"), false, ErrnoInvalidTTL},
		{"two ttls", h("TTL", "1", "TTL", "2"), false, ErrnoInvalidTTL},
		{"long topic", h("TTL", "1", "Topic", strings.Repeat("a", 33)), false, ErrnoInvalidTopic},
		{"topic space", h("TTL", "1", "Topic", "a b"), false, ErrnoInvalidTopic},
		{"topic only padding", h("TTL", "1", "Topic", "=="), false, ErrnoInvalidTopic},
		{"topic padding inside", h("TTL", "1", "Topic", "a=b"), false, ErrnoInvalidTopic},
		{"no encoding", h("TTL", "1"), true, ErrnoInvalidCrypto},
		{"unknown encoding", h("TTL", "1", "Content-Encoding", "gzip"), true, ErrnoInvalidCrypto},
		{"aes128gcm with salt", h("TTL", "1", "Content-Encoding", "aes128gcm", "Encryption", "salt=x"), true, ErrnoInvalidCrypto},
		{"aes128gcm with dh", h("TTL", "1", "Content-Encoding", "aes128gcm", "Crypto-Key", "dh=x"), true, ErrnoInvalidCrypto},
		{"aesgcm without salt", h("TTL", "1", "Content-Encoding", "aesgcm"), true, ErrnoInvalidCrypto},
		{"aesgcm crypto-key without dh", h("TTL", "1", "Content-Encoding", "aesgcm", "Encryption", "salt=x", "Crypto-Key", "keyid=a"), true, ErrnoInvalidCrypto},
	}
	for _, c := range bad {
		_, err := ParseSendHeaders(c.h, c.body)
		require.Error(t, err, c.name)
		requirePushErr(t, err, 400, c.errno)
	}
}

func TestParseVAPID(t *testing.T) {
	t.Parallel()
	const aud = "https://push.example.test"
	now := time.Unix(1_800_000_000, 0)
	key := newVAPIDKey(t)
	other := newVAPIDKey(t)
	sign := func(k *vapidKey, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodES256, claims).SignedString(k.priv)
		require.NoError(t, err)
		return s
	}
	b64 := base64.RawURLEncoding.EncodeToString
	good := sign(key, jwt.MapClaims{"aud": aud, "exp": now.Add(time.Hour).Unix(), "sub": "mailto:a@example.test"})
	hdr := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	accepted := map[string]http.Header{
		"vapid":           hdr("Authorization", "vapid t="+good+", k="+b64(key.pub)),
		"order and case":  hdr("Authorization", "VAPID k="+b64(key.pub)+",t="+good+", x=1"),
		"std base64 key":  hdr("Authorization", "vapid t="+good+", k="+base64.StdEncoding.EncodeToString(key.pub)),
		"legacy WebPush":  hdr("Authorization", "WebPush "+good, "Crypto-Key", "dh=abc;p256ecdsa="+b64(key.pub)),
		"legacy Bearer":   hdr("Authorization", "Bearer "+good, "Crypto-Key", `keyid="a";dh="b", p256ecdsa="`+b64(key.pub)+`"`),
		"exp at 24h edge": hdr("Authorization", "vapid t="+sign(key, jwt.MapClaims{"aud": aud, "exp": now.Add(24 * time.Hour).Unix()})+", k="+b64(key.pub)),
	}
	// Every case through ParseVAPID and through a VAPIDCache, twice:
	// the cache's miss and its hit answer alike.
	cache := NewVAPIDCache(0)
	parsers := map[string]func(http.Header, string, time.Time) (*VAPID, error){
		"ParseVAPID": ParseVAPID, "cache miss": cache.Parse, "cache hit": cache.Parse,
	}
	for _, which := range []string{"ParseVAPID", "cache miss", "cache hit"} {
		for name, h := range accepted {
			v, err := parsers[which](h, aud, now)
			require.NoError(t, err, "%s: %s", which, name)
			require.Equal(t, key.pub, v.PublicKey, "%s: %s", which, name)
		}
	}
	v, err := ParseVAPID(http.Header{}, aud, now)
	require.NoError(t, err)
	require.Nil(t, v, "no Authorization: no VAPID")

	hs256, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"aud": aud, "exp": now.Add(time.Hour).Unix()}).SignedString([]byte("secret"))
	require.NoError(t, err)
	notOnCurve := append([]byte{4}, make([]byte, 64)...)
	rejected := map[string]http.Header{
		"wrong aud":       hdr("Authorization", "vapid t="+sign(key, jwt.MapClaims{"aud": "https://other.test", "exp": now.Add(time.Hour).Unix()})+", k="+b64(key.pub)),
		"aud with slash":  hdr("Authorization", "vapid t="+sign(key, jwt.MapClaims{"aud": aud + "/", "exp": now.Add(time.Hour).Unix()})+", k="+b64(key.pub)),
		"exp too far":     hdr("Authorization", "vapid t="+sign(key, jwt.MapClaims{"aud": aud, "exp": now.Add(24*time.Hour).Unix() + 1})+", k="+b64(key.pub)),
		"expired":         hdr("Authorization", "vapid t="+sign(key, jwt.MapClaims{"aud": aud, "exp": now.Add(-time.Second).Unix()})+", k="+b64(key.pub)),
		"exp not numeric": hdr("Authorization", "vapid t="+sign(key, jwt.MapClaims{"aud": aud, "exp": "@"})+", k="+b64(key.pub)),
		"no exp":          hdr("Authorization", "vapid t="+sign(key, jwt.MapClaims{"aud": aud})+", k="+b64(key.pub)),
		"no aud":          hdr("Authorization", "vapid t="+sign(key, jwt.MapClaims{"exp": now.Add(time.Hour).Unix()})+", k="+b64(key.pub)),
		"wrong key":       hdr("Authorization", "vapid t="+good+", k="+b64(other.pub)),
		"bad signature":   hdr("Authorization", "vapid t="+good[:len(good)-4]+"AAAA, k="+b64(key.pub)),
		"HS256":           hdr("Authorization", "vapid t="+hs256+", k="+b64(key.pub)),
		"alg none":        hdr("Authorization", "vapid t=eyJhbGciOiJub25lIn0.eyJhdWQiOiJ4In0., k="+b64(key.pub)),
		"no k":            hdr("Authorization", "vapid t="+good),
		"no t":            hdr("Authorization", "vapid k="+b64(key.pub)),
		"key off curve":   hdr("Authorization", "vapid t="+good+", k="+b64(notOnCurve)),
		"short key":       hdr("Authorization", "vapid t="+good+", k="+b64(key.pub[:33])),
		"garbage key":     hdr("Authorization", "vapid t="+good+", k=!!!"),
		"unknown scheme":  hdr("Authorization", "Basic abc"),
		"legacy no key":   hdr("Authorization", "WebPush "+good),
		"huge":            hdr("Authorization", "vapid t="+strings.Repeat("a", 10000)),
	}
	for _, which := range []string{"ParseVAPID", "cache miss", "cache hit"} {
		for name, h := range rejected {
			_, err := parsers[which](h, aud, now)
			require.Error(t, err, "%s: %s", which, name)
			requirePushErr(t, err, 401, ErrnoVAPID)
		}
	}
}

// TestVAPIDCache: a cached token answers only for the same token, key and
// audience, and only until its exp; failures are not cached; the cache is
// bounded.
func TestVAPIDCache(t *testing.T) {
	t.Parallel()
	const aud = "https://push.example.test"
	now := time.Unix(1_800_000_000, 0)
	key, other := newVAPIDKey(t), newVAPIDKey(t)
	b64 := base64.RawURLEncoding.EncodeToString
	tok, err := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"aud": aud, "exp": now.Add(time.Hour).Unix()}).SignedString(key.priv)
	require.NoError(t, err)
	hdr := func(tok string, pub []byte) http.Header {
		return http.Header{"Authorization": {"vapid t=" + tok + ", k=" + b64(pub)}}
	}
	c := NewVAPIDCache(2)
	v, err := c.Parse(hdr(tok, key.pub), aud, now)
	require.NoError(t, err)
	require.Equal(t, now.Add(time.Hour), v.Expires)
	require.Equal(t, 1, c.Len())
	// Same token for another origin, or with another key: not a hit, and
	// refused as ParseVAPID refuses it.
	_, err = c.Parse(hdr(tok, key.pub), "https://other.example.test", now)
	requirePushErr(t, err, 401, ErrnoVAPID)
	_, err = c.Parse(hdr(tok, other.pub), aud, now)
	requirePushErr(t, err, 401, ErrnoVAPID)
	require.Equal(t, 1, c.Len(), "failures are not cached")
	// A hit until exp, then expired.
	_, err = c.Parse(hdr(tok, key.pub), aud, now.Add(time.Hour-time.Second))
	require.NoError(t, err)
	_, err = c.Parse(hdr(tok, key.pub), aud, now.Add(time.Hour))
	requirePushErr(t, err, 401, ErrnoVAPID)
	require.Zero(t, c.Len(), "the expired entry is dropped")
	// Bounded: the least recently used goes.
	for i := range 3 {
		tk, err := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"aud": aud, "exp": now.Add(time.Hour).Unix(), "jti": i}).SignedString(key.priv)
		require.NoError(t, err)
		_, err = c.Parse(hdr(tk, key.pub), aud, now)
		require.NoError(t, err)
	}
	require.Equal(t, 2, c.Len())
}

// BenchmarkVAPID: the cost of a send's VAPID check, verified each time
// against a cache hit.
func BenchmarkVAPID(b *testing.B) {
	const aud = "https://push.example.test"
	now := time.Now()
	key := newVAPIDKey(b)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"aud": aud, "exp": now.Add(time.Hour).Unix()}).SignedString(key.priv)
	if err != nil {
		b.Fatal(err)
	}
	h := http.Header{"Authorization": {"vapid t=" + tok + ", k=" + base64.RawURLEncoding.EncodeToString(key.pub)}}
	b.Run("verify", func(b *testing.B) {
		for b.Loop() {
			if _, err := ParseVAPID(h, aud, now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := NewVAPIDCache(0)
		for b.Loop() {
			if _, err := c.Parse(h, aud, now); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestWriteError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err    error
		status int
		header string
		value  string
	}{
		{&Error{Status: 410, Errno: ErrnoNoSubscription, Message: "gone"}, 410, "Cache-Control", "max-age=86400"},
		{&Error{Status: 503, Errno: ErrnoRetry, Message: "later"}, 503, "Retry-After", "120"},
		{&Error{Status: 401, Errno: ErrnoVAPID, Message: "who"}, 401, "WWW-Authenticate", "vapid"},
		{errors.New("secret detail"), 500, "Content-Type", "application/json"},
	} {
		w := httptest.NewRecorder()
		WriteError(w, c.err)
		require.Equal(t, c.status, w.Code)
		require.Equal(t, c.value, w.Header().Get(c.header))
		require.Contains(t, w.Body.String(), `"code":`+itoa(c.status))
		require.NotContains(t, w.Body.String(), "secret detail")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestWebpushGoRequestAccepted: what the Go webpush-go library sends
// (aes128gcm, VAPID "vapid t=, k=", a body padded to 4,096 bytes, TTL)
// passes herald's header and VAPID checks as it is.
func TestWebpushGoRequestAccepted(t *testing.T) {
	t.Parallel()
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(r.Context())
		body, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	priv, pub, err := webpush.GenerateVAPIDKeys()
	require.NoError(t, err)
	ua, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	uaPub, err := ua.PublicKey.ECDH()
	require.NoError(t, err)
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	resp, err := webpush.SendNotification([]byte("hello"), &webpush.Subscription{
		Endpoint: srv.URL + "/wpush/v1/x",
		Keys:     webpush.Keys{P256dh: base64.RawURLEncoding.EncodeToString(uaPub.Bytes()), Auth: base64.RawURLEncoding.EncodeToString(auth)},
	}, &webpush.Options{Subscriber: "ops@example.test", VAPIDPublicKey: pub, VAPIDPrivateKey: priv, TTL: 30})
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Len(t, body, 4096, "webpush-go pads to 4,096 bytes: within MaxBodyBytes")
	sh, err := ParseSendHeaders(got.Header, true)
	require.NoError(t, err)
	require.Equal(t, 30, sh.TTL)
	v, err := ParseVAPID(got.Header, srv.URL, time.Now())
	require.NoError(t, err)
	want, err := base64.RawURLEncoding.DecodeString(pub)
	require.NoError(t, err)
	require.Equal(t, want, v.PublicKey)
}

func FuzzParseEndpointToken(f *testing.F) {
	k := mustKeys(f, "0000000000000000000000000000000000000000000=")
	tok, err := k.EndpointToken(&Endpoint{UAID: testUAID, ChannelID: testChid})
	require.NoError(f, err)
	f.Add(tok, 1)
	f.Add(tok[:70], 2)
	f.Add("", 0)
	f.Add("====", 1)
	f.Fuzz(func(t *testing.T, s string, version int) {
		e, err := k.ParseEndpointToken(s, version)
		if err == nil {
			require.Len(t, e.UAID, 32)
			return
		}
		requirePushErr(t, err, 404, ErrnoInvalidToken)
	})
}

func FuzzParseMessageID(f *testing.F) {
	k := mustKeys(f, "0000000000000000000000000000000000000000000=")
	id, err := k.MessageID(&MessageRef{UAID: testUAID, ChannelID: testChid, ID: "pm_1", Topic: "t"})
	require.NoError(f, err)
	f.Add(id)
	f.Add("x")
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := k.ParseMessageID(s); err != nil {
			requirePushErr(t, err, 404, ErrnoInvalidToken)
		}
	})
}

func FuzzParseVAPID(f *testing.F) {
	f.Add("vapid t=a.b.c, k=BA", "")
	f.Add("WebPush a.b.c", "p256ecdsa=BA;dh=x")
	f.Add("vapid t=eyJhbGciOiJFUzI1NiJ9.e30.AAAA, k="+strings.Repeat("B", 87), "")
	f.Fuzz(func(t *testing.T, auth, cryptoKey string) {
		h := http.Header{}
		h.Set("Authorization", auth)
		h.Set("Crypto-Key", cryptoKey)
		if _, err := ParseVAPID(h, "https://x.test", time.Unix(1_800_000_000, 0)); err != nil {
			requirePushErr(t, err, 401, ErrnoVAPID)
		}
	})
}

func FuzzParseSendHeaders(f *testing.F) {
	f.Add("60", "topic", "aes128gcm", "", "", true)
	f.Add("0", "", "aesgcm", `salt="abc=="`, `dh="x";p256ecdsa=y`, true)
	f.Add("-1", "a b", "", "", "", false)
	f.Fuzz(func(t *testing.T, ttl, topic, enc, encryption, cryptoKey string, body bool) {
		h := http.Header{}
		for k, v := range map[string]string{"TTL": ttl, "Topic": topic, "Content-Encoding": enc, "Encryption": encryption, "Crypto-Key": cryptoKey} {
			if v != "" {
				h.Set(k, v)
			}
		}
		sh, err := ParseSendHeaders(h, body)
		if err != nil {
			var pe *Error
			require.True(t, errors.As(err, &pe))
			require.Equal(t, 400, pe.Status)
			return
		}
		require.GreaterOrEqual(t, sh.TTL, 0)
		require.LessOrEqual(t, sh.TTL, MaxTTL)
		require.NotContains(t, sh.Crypto["crypto_key"], "p256ecdsa", "the VAPID key never reaches the user agent")
	})
}
