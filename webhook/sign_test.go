package webhook

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

// The Standard Webhooks test vector, shared by the official libraries' tests.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorMsgID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorPayload   = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignVector(t *testing.T) {
	t.Parallel()

	ts := time.Unix(vectorTimestamp, 0)
	for _, secret := range []string{vectorSecret, strings.TrimPrefix(vectorSecret, SecretPrefix)} {
		sig, err := Sign(secret, vectorMsgID, ts, []byte(vectorPayload))
		require.NoError(t, err)
		require.Equal(t, vectorSignature, sig)
	}

	// Sub-second parts of the timestamp are not signed.
	sig, err := Sign(vectorSecret, vectorMsgID, ts.Add(999*time.Millisecond), []byte(vectorPayload))
	require.NoError(t, err)
	require.Equal(t, vectorSignature, sig)
}

func TestSignInvalidSecret(t *testing.T) {
	t.Parallel()

	for _, secret := range []string{"", "whsec_", "whsec_!!!not-base64", "not base64"} {
		_, err := Sign(secret, vectorMsgID, time.Unix(vectorTimestamp, 0), []byte(vectorPayload))
		require.ErrorIs(t, err, ErrInvalidSecret, "secret %q", secret)
		require.NotContains(t, err.Error(), "not-base64", "the secret must not leak into errors")
	}
}

func TestValidSecret(t *testing.T) {
	t.Parallel()

	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	tests := []struct {
		name   string
		secret string
		ok     bool
	}{
		{"test vector (24 bytes)", vectorSecret, true},
		{"no prefix", strings.TrimPrefix(vectorSecret, SecretPrefix), true},
		{"64 bytes", SecretPrefix + b64(64), true},
		{"unpadded", SecretPrefix + base64.RawStdEncoding.EncodeToString(make([]byte, 32)), true},
		{"23 bytes", SecretPrefix + b64(23), false},
		{"65 bytes", SecretPrefix + b64(65), false},
		{"empty", "", false},
		{"bare prefix", SecretPrefix, false},
		{"not base64", SecretPrefix + "%%%%", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ValidSecret(tt.secret)
			if tt.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrInvalidSecret)
			}
		})
	}
}

func TestNewSecret(t *testing.T) {
	t.Parallel()

	a, b := NewSecret(), NewSecret()
	require.NotEqual(t, a, b)
	require.True(t, strings.HasPrefix(a, SecretPrefix))
	require.NoError(t, ValidSecret(a))
	key, err := decodeSecret(a)
	require.NoError(t, err)
	require.Len(t, key, 32)
}

func TestSignatureHeader(t *testing.T) {
	t.Parallel()

	ts := time.Unix(vectorTimestamp, 0)
	other := NewSecret()
	h, err := SignatureHeader([]string{vectorSecret, other}, vectorMsgID, ts, []byte(vectorPayload))
	require.NoError(t, err)
	entries := strings.Split(h, " ")
	require.Len(t, entries, 2)
	require.Equal(t, vectorSignature, entries[0])
	want, err := Sign(other, vectorMsgID, ts, []byte(vectorPayload))
	require.NoError(t, err)
	require.Equal(t, want, entries[1])

	_, err = SignatureHeader(nil, vectorMsgID, ts, nil)
	require.ErrorIs(t, err, ErrNoSecret)
	_, err = SignatureHeader([]string{vectorSecret, "whsec_"}, vectorMsgID, ts, nil)
	require.ErrorIs(t, err, ErrInvalidSecret)
}

// signedHeaders returns the three Standard Webhooks headers for the vector
// message signed with secrets at ts.
func signedHeaders(t *testing.T, secrets []string, ts time.Time) http.Header {
	t.Helper()
	sig, err := SignatureHeader(secrets, vectorMsgID, ts, []byte(vectorPayload))
	require.NoError(t, err)
	h := http.Header{}
	h.Set(HeaderID, vectorMsgID)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, sig)
	return h
}

func TestVerify(t *testing.T) {
	t.Parallel()

	now := time.Unix(vectorTimestamp, 0)
	tol := 5 * time.Minute
	tests := []struct {
		name   string
		modify func(h http.Header)
		now    time.Time
		want   error
	}{
		{name: "valid", now: now},
		{name: "at -tolerance", now: now.Add(tol)},
		{name: "at +tolerance", now: now.Add(-tol)},
		{name: "too old", now: now.Add(tol + time.Second), want: ErrTimestampTooOld},
		{name: "too new", now: now.Add(-tol - time.Second), want: ErrTimestampTooNew},
		{name: "missing id", now: now, modify: func(h http.Header) { h.Del(HeaderID) }, want: ErrMissingHeaders},
		{name: "missing timestamp", now: now, modify: func(h http.Header) { h.Del(HeaderTimestamp) }, want: ErrMissingHeaders},
		{name: "missing signature", now: now, modify: func(h http.Header) { h.Del(HeaderSignature) }, want: ErrMissingHeaders},
		{name: "bad timestamp", now: now, modify: func(h http.Header) { h.Set(HeaderTimestamp, "yesterday") }, want: ErrInvalidTimestamp},
		{
			name: "wrong signature", now: now, want: ErrNoMatchingSignature,
			modify: func(h http.Header) { h.Set(HeaderSignature, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=") },
		},
		{name: "partial signature", now: now, modify: func(h http.Header) { h.Set(HeaderSignature, "v1,") }, want: ErrNoMatchingSignature},
		{
			name: "right signature, wrong version", now: now, want: ErrNoMatchingSignature,
			modify: func(h http.Header) { h.Set(HeaderSignature, "v2,"+strings.TrimPrefix(vectorSignature, "v1,")) },
		},
		{
			name: "one valid among several", now: now,
			modify: func(h http.Header) {
				h.Set(HeaderSignature, strings.Join([]string{
					"v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
					"v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
					h.Get(HeaderSignature),
					"garbage",
				}, " "))
			},
		},
		{name: "other message id", now: now, modify: func(h http.Header) { h.Set(HeaderID, "msg_other") }, want: ErrNoMatchingSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := signedHeaders(t, []string{vectorSecret}, now)
			if tt.modify != nil {
				tt.modify(h)
			}
			err := Verify([]string{vectorSecret}, h, []byte(vectorPayload), tt.now, tol)
			if tt.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.want)
			}
		})
	}
}

func TestVerifyRotation(t *testing.T) {
	t.Parallel()

	now := time.Unix(vectorTimestamp, 0)
	old, next := vectorSecret, NewSecret()
	h := signedHeaders(t, []string{old, next}, now)
	body := []byte(vectorPayload)

	// A receiver that knows either secret accepts the message.
	require.NoError(t, Verify([]string{old}, h, body, now, 0))
	require.NoError(t, Verify([]string{next}, h, body, now, 0))
	require.ErrorIs(t, Verify([]string{NewSecret()}, h, body, now, 0), ErrNoMatchingSignature)
	require.ErrorIs(t, Verify([]string{old}, h, []byte(`{"test": 1}`), now, 0), ErrNoMatchingSignature)
	// tolerance 0 means DefaultTolerance.
	require.ErrorIs(t, Verify([]string{old}, h, body, now.Add(DefaultTolerance+time.Second), 0), ErrTimestampTooOld)
}

// TestOfficialLibraryVerifies holds herald's headers to the official
// Standard Webhooks Go library, with one secret and with two (rotation).
func TestOfficialLibraryVerifies(t *testing.T) {
	t.Parallel()

	// The library checks the timestamp against the wall clock.
	now := time.Now()
	body := []byte(`{"id":"evt_1","type":"bundle.indexed","data":{"n":1}}`)
	second := NewSecret()

	for _, secrets := range [][]string{{vectorSecret}, {vectorSecret, second}} {
		sig, err := SignatureHeader(secrets, vectorMsgID, now, body)
		require.NoError(t, err)
		h := http.Header{}
		h.Set(HeaderID, vectorMsgID)
		h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		h.Set(HeaderSignature, sig)

		for _, secret := range secrets {
			wh, err := standardwebhooks.NewWebhook(secret)
			require.NoError(t, err)
			require.NoError(t, wh.Verify(body, h), "secret %d of %d", len(secrets), len(secrets))
			require.Error(t, wh.Verify(append(body, ' '), h))
		}
	}

	// And the library's own signature equals ours.
	wh, err := standardwebhooks.NewWebhook(vectorSecret)
	require.NoError(t, err)
	theirs, err := wh.Sign(vectorMsgID, time.Unix(vectorTimestamp, 0), []byte(vectorPayload))
	require.NoError(t, err)
	require.Equal(t, vectorSignature, theirs)
}
