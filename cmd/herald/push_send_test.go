package main

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	webpushdest "github.com/heraldhq/herald/destination/webpush"
	"github.com/heraldhq/herald/seal"
)

// openAES128GCM decrypts one RFC 8291 record as a browser does.
func openAES128GCM(t *testing.T, body []byte, ua *ecdh.PrivateKey, auth []byte) string {
	t.Helper()
	require.Greater(t, len(body), 21)
	idlen := int(body[20])
	salt, rs := body[:16], binary.BigEndian.Uint32(body[16:20])
	require.GreaterOrEqual(t, rs, uint32(18))
	as, err := ecdh.P256().NewPublicKey(body[21 : 21+idlen])
	require.NoError(t, err)
	shared, err := ua.ECDH(as)
	require.NoError(t, err)
	prkKey, err := hkdf.Extract(sha256.New, shared, auth)
	require.NoError(t, err)
	ikm, err := hkdf.Expand(sha256.New, prkKey, "WebPush: info\x00"+string(ua.PublicKey().Bytes())+string(as.Bytes()), 32)
	require.NoError(t, err)
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	require.NoError(t, err)
	cek, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	require.NoError(t, err)
	nonce, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	require.NoError(t, err)
	block, err := aes.NewCipher(cek)
	require.NoError(t, err)
	gcm, err := cipher.NewGCM(block)
	require.NoError(t, err)
	plain, err := gcm.Open(nil, nonce, body[21+idlen:], nil)
	require.NoError(t, err)
	plain = []byte(strings.TrimRight(string(plain), "\x00"))
	require.Equal(t, byte(2), plain[len(plain)-1], "last-record delimiter")
	return string(plain[:len(plain)-1])
}

// TestPushSend: herald push send encrypts and VAPID-signs a message for a
// subscription made with herald's VAPID key on herald's own push service;
// a WebSocket user agent receives and decrypts it. Unsigned, the same send
// is refused 401 (the README's old curl example), and the command says why.
func TestPushSend(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := heraldBinary(t)
	key, err := seal.GenerateKey()
	require.NoError(t, err)
	storeArgs := []string{"--data-dir", t.TempDir(), "--encryption-key", key}
	addr := freeAddr(t)
	startNode(t, bin, addr, append([]string{"--dev", "--api-token", "tok"}, storeArgs...)...)
	vapid := vapidPublicKey(t, addr)
	resp, err := http.Get("http://" + addr + "/dev/push-demo/")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the --dev demo page")

	ua := dialUA(t, addr, "")
	ua.send(map[string]any{"messageType": "register", "channelID": "0b7e2a4c-1d3f-4e5a-8b6c-7d8e9f0a1b2c", "key": vapid})
	r := ua.read(10 * time.Second)
	require.EqualValues(t, 200, r["status"], r)
	endpoint := r["pushEndpoint"].(string)

	uaKey, err := ecdh.P256().GenerateKey(rand.Reader)
	require.NoError(t, err)
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	p256dh := base64.RawURLEncoding.EncodeToString(uaKey.PublicKey().Bytes())
	authB64 := base64.RawURLEncoding.EncodeToString(auth)

	// Unsigned: 401, and the hint.
	out, err := exec.Command(bin, "push", "send", endpoint, "--p256dh", p256dh, "--auth", authB64, "--data", "x").CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "401")
	require.Contains(t, string(out), "--from-store")

	// Signed with herald's key, from a subscription file.
	sub, err := json.Marshal(map[string]any{"endpoint": endpoint, "keys": map[string]string{"p256dh": p256dh, "auth": authB64}})
	require.NoError(t, err)
	subFile := filepath.Join(t.TempDir(), "sub.json")
	require.NoError(t, os.WriteFile(subFile, sub, 0o600))
	out, err = exec.Command(bin, append([]string{"push", "send", "--subscription", "@" + subFile, "--from-store",
		"--data", `{"hello":"from herald push send"}`}, storeArgs...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "201 Created")
	require.Contains(t, string(out), "Location: ")

	n := ua.read(10 * time.Second)
	require.Equal(t, "notification", n["messageType"], n)
	body, err := base64.RawURLEncoding.DecodeString(n["data"].(string))
	require.NoError(t, err)
	require.Equal(t, `{"hello":"from herald push send"}`, openAES128GCM(t, body, uaKey, auth))
	ua.ack(n)

	// A key of one's own (the web-push CLI's format) signs too, and the
	// service refuses it: the subscription names herald's key.
	priv, _, err := webpushdest.GenerateVAPIDKey()
	require.NoError(t, err)
	keyFile := filepath.Join(t.TempDir(), "vapid.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(priv+"\n"), 0o600))
	out, err = exec.Command(bin, "push", "send", endpoint, "--p256dh", p256dh, "--auth", authB64, "--vapid-key", keyFile).CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "401")
}
