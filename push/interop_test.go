package push

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/http"
	"testing"

	webpush "github.com/SherClockHolmes/webpush-go"
	"github.com/stretchr/testify/require"
)

// decryptAES128GCM opens an RFC 8291 message (one aes128gcm record) with
// the user agent's key pair and auth secret, as a browser does.
func decryptAES128GCM(body []byte, ua *ecdh.PrivateKey, auth []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("short body")
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if len(body) < 21+idlen || rs < 18 {
		return nil, errors.New("bad header")
	}
	asPub, err := ecdh.P256().NewPublicKey(body[21 : 21+idlen])
	if err != nil {
		return nil, err
	}
	shared, err := ua.ECDH(asPub)
	if err != nil {
		return nil, err
	}
	prkKey, err := hkdf.Extract(sha256.New, shared, auth)
	if err != nil {
		return nil, err
	}
	info := append(append([]byte("WebPush: info\x00"), ua.PublicKey().Bytes()...), asPub.Bytes()...)
	ikm, err := hkdf.Expand(sha256.New, prkKey, string(info), 32)
	if err != nil {
		return nil, err
	}
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, nonce, body[21+idlen:], nil)
	if err != nil {
		return nil, err
	}
	// Padding: trailing zeros after the 0x02 last-record delimiter.
	i := len(plain) - 1
	for i >= 0 && plain[i] == 0 {
		i--
	}
	if i < 0 || plain[i] != 2 {
		return nil, errors.New("no record delimiter")
	}
	return plain[:i], nil
}

// TestWebpushGoToWebSocket: the Go webpush-go library encrypts and signs a
// message for a v2 endpoint; a WebSocket user agent receives the exact
// ciphertext and decrypts it to the exact plaintext.
func TestWebpushGoToWebSocket(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	vapidPriv, vapidPub, err := webpush.GenerateVAPIDKeys()
	require.NoError(t, err)
	c, _, _ := e.connected(t)
	chid := newChid()
	c.send(map[string]any{"messageType": "register", "channelID": chid, "key": vapidPub})
	r := c.readType("register")
	require.EqualValues(t, 200, r["status"], r)
	ep := r["pushEndpoint"].(string)

	ua, err := ecdh.P256().GenerateKey(rand.Reader)
	require.NoError(t, err)
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	plaintext := []byte("herald ✓ webpush-go \x00\x01\xff")
	status := make(chan int, 1)
	go func() {
		resp, err := webpush.SendNotification(plaintext, &webpush.Subscription{
			Endpoint: ep,
			Keys:     webpush.Keys{P256dh: base64.RawURLEncoding.EncodeToString(ua.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(auth)},
		}, &webpush.Options{Subscriber: "ops@example.test", VAPIDPublicKey: vapidPub, VAPIDPrivateKey: vapidPriv, TTL: 60})
		if err != nil {
			status <- -1
			return
		}
		_ = resp.Body.Close()
		status <- resp.StatusCode
	}()
	n := c.readType("notification")
	require.Equal(t, chid, n["channelID"])
	require.Equal(t, map[string]any{"encoding": "aes128gcm"}, n["headers"])
	body, err := base64.RawURLEncoding.DecodeString(n["data"].(string))
	require.NoError(t, err)
	require.Len(t, body, 4096, "the body arrives byte for byte (webpush-go pads to 4,096)")
	got, err := decryptAES128GCM(body, ua, auth)
	require.NoError(t, err)
	require.Equal(t, plaintext, got)
	c.ack(chid, n["version"].(string))
	require.Equal(t, http.StatusCreated, <-status)
}
