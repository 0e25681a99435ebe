package webpushdest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}

// hmacSHA256 is one HKDF step written out, as RFC 8291 §3.4 spells the
// derivation: the decryption below shares no code with Encrypt.
func hmacSHA256(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// decrypt is an independent RFC 8291 receiver: the user agent's side.
func decrypt(uaPriv *ecdh.PrivateKey, auth, body []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("short body")
	}
	salt := body[:16]
	rs := binary.BigEndian.Uint32(body[16:20])
	idlen := int(body[20])
	if len(body) < 21+idlen {
		return nil, errors.New("short header")
	}
	asPub, err := ecdh.P256().NewPublicKey(body[21 : 21+idlen])
	if err != nil {
		return nil, fmt.Errorf("keyid: %w", err)
	}
	record := body[21+idlen:]
	if uint32(len(record)) > rs {
		return nil, fmt.Errorf("record of %d bytes over rs %d", len(record), rs)
	}
	secret, err := uaPriv.ECDH(asPub)
	if err != nil {
		return nil, err
	}
	prkKey := hmacSHA256(auth, secret)
	keyInfo := append(append([]byte("WebPush: info\x00"), uaPriv.PublicKey().Bytes()...), asPub.Bytes()...)
	ikm := hmacSHA256(prkKey, keyInfo, []byte{1})
	prk := hmacSHA256(salt, ikm)
	cek := hmacSHA256(prk, []byte("Content-Encoding: aes128gcm\x00"), []byte{1})[:16]
	nonce := hmacSHA256(prk, []byte("Content-Encoding: nonce\x00"), []byte{1})[:12]
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, nonce, record, nil)
	if err != nil {
		return nil, err
	}
	// Strip the padding, then the delimiter: 0x02 ends the last record.
	i := len(plain) - 1
	for i >= 0 && plain[i] == 0 {
		i--
	}
	if i < 0 || plain[i] != 2 {
		return nil, errors.New("no last-record delimiter")
	}
	return plain[:i], nil
}

// userAgent is a browser's subscription keys.
type userAgent struct {
	priv *ecdh.PrivateKey
	auth []byte
}

func newUserAgent(t *testing.T) *userAgent {
	t.Helper()
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	require.NoError(t, err)
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	return &userAgent{priv: priv, auth: auth}
}

func (ua *userAgent) p256dh() string {
	return base64.RawURLEncoding.EncodeToString(ua.priv.PublicKey().Bytes())
}
func (ua *userAgent) authB64() string { return base64.RawURLEncoding.EncodeToString(ua.auth) }

func (ua *userAgent) keys(t *testing.T) *Keys {
	t.Helper()
	k, err := ParseKeys(ua.p256dh(), ua.authB64())
	require.NoError(t, err)
	return k
}

// TestRFC8291Vector: Appendix A of RFC 8291, byte for byte.
func TestRFC8291Vector(t *testing.T) {
	t.Parallel()
	asPriv, err := ecdh.P256().NewPrivateKey(b64(t, "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"))
	require.NoError(t, err)
	require.Equal(t, "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8",
		base64.RawURLEncoding.EncodeToString(asPriv.PublicKey().Bytes()))
	keys, err := ParseKeys("BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", "BTBZMqHH6r4Tts7J_aSIgg")
	require.NoError(t, err)
	body, err := encrypt(keys, []byte("When I grow up, I want to be a watermelon"), asPriv, b64(t, "DGv6ra1nlYgDCS1FRnbzlw"))
	require.NoError(t, err)
	require.Equal(t, "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN",
		base64.RawURLEncoding.EncodeToString(body))

	uaPriv, err := ecdh.P256().NewPrivateKey(b64(t, "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"))
	require.NoError(t, err)
	plain, err := decrypt(uaPriv, b64(t, "BTBZMqHH6r4Tts7J_aSIgg"), body)
	require.NoError(t, err)
	require.Equal(t, "When I grow up, I want to be a watermelon", string(plain))
}

func TestEncryptRoundTrip(t *testing.T) {
	t.Parallel()
	ua := newUserAgent(t)
	for _, n := range []int{0, 1, 100, 1000, MaxPlaintext} {
		plain := make([]byte, n)
		_, _ = rand.Read(plain)
		orig := bytes.Clone(plain)
		body, err := Encrypt(ua.keys(t), plain)
		require.NoError(t, err)
		require.Equal(t, orig, plain, "Encrypt wrote into the caller's payload")
		// One record, padded by the delimiter only.
		require.Len(t, body, 86+n+1+16)
		got, err := decrypt(ua.priv, ua.auth, body)
		require.NoError(t, err, "n=%d", n)
		require.Equal(t, orig, got)
		// Fresh salt and ephemeral key every time.
		again, err := Encrypt(ua.keys(t), plain)
		require.NoError(t, err)
		require.NotEqual(t, body[:16], again[:16])
		require.NotEqual(t, body[21:86], again[21:86])
	}
	// Another subscription's keys do not open it.
	body, err := Encrypt(ua.keys(t), []byte("secret"))
	require.NoError(t, err)
	other := newUserAgent(t)
	_, err = decrypt(other.priv, other.auth, body)
	require.Error(t, err)
}

// TestEncryptSizeBoundary: 3993 bytes is the largest payload whose body
// fits 4096 bytes; one more is ErrTooLarge.
func TestEncryptSizeBoundary(t *testing.T) {
	t.Parallel()
	require.Equal(t, 3993, MaxPlaintext)
	ua := newUserAgent(t)
	body, err := Encrypt(ua.keys(t), bytes.Repeat([]byte("x"), MaxPlaintext))
	require.NoError(t, err)
	require.Len(t, body, MaxBody)
	_, err = Encrypt(ua.keys(t), bytes.Repeat([]byte("x"), MaxPlaintext+1))
	require.ErrorIs(t, err, ErrTooLarge)
	require.Contains(t, err.Error(), "3994 bytes")
}

func TestParseKeys(t *testing.T) {
	t.Parallel()
	ua := newUserAgent(t)
	_, err := ParseKeys(ua.p256dh(), ua.authB64())
	require.NoError(t, err)
	// Padded base64url is read too (some libraries pad).
	_, err = ParseKeys(base64.URLEncoding.EncodeToString(ua.priv.PublicKey().Bytes()), base64.URLEncoding.EncodeToString(ua.auth))
	require.NoError(t, err)

	notOnCurve := append([]byte{4}, bytes.Repeat([]byte{1}, 64)...)
	for name, tc := range map[string][2]string{
		"p256dh not base64":  {"!!!", ua.authB64()},
		"p256dh compressed":  {base64.RawURLEncoding.EncodeToString(append([]byte{2}, make([]byte, 32)...)), ua.authB64()},
		"p256dh not a point": {base64.RawURLEncoding.EncodeToString(notOnCurve), ua.authB64()},
		"auth short":         {ua.p256dh(), base64.RawURLEncoding.EncodeToString(make([]byte, 15))},
		"auth not base64":    {ua.p256dh(), "*"},
		"empty":              {"", ""},
	} {
		_, err := ParseKeys(tc[0], tc[1])
		require.Error(t, err, name)
		require.True(t, strings.HasPrefix(err.Error(), "keys."), "%s: %v", name, err)
	}
}
