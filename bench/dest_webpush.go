package bench

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/heraldhq/herald/client"
)

// pushService is the Web Push destination's receiving side: a local push
// service that answers 201 Created to every message and timestamps it, and
// the browser's keys, so the run can decrypt what herald sent (RFC 8291)
// after the measured phase and read the bench stamp. herald's in-process
// node runs with --dev, which lets it send to an http:// loopback endpoint.
// The raw phase POSTs bodies of the encrypted size to /raw.
type pushService struct {
	run  string
	ln   net.Listener
	srv  *http.Server
	priv *ecdh.PrivateKey
	auth []byte
	arr  *arrivals
	tr   *http.Transport
}

// pushHeaderLen is the aes128gcm header herald's messages carry: salt 16,
// record size 4, key id length 1, the sender's P-256 key 65 (RFC 8291 §4);
// pushOverhead adds the padding delimiter and the AEAD tag.
const (
	pushHeaderLen = 86
	pushOverhead  = pushHeaderLen + 1 + 16
)

func newPushService(run string) (*pushService, error) {
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &pushService{run: run, ln: ln, priv: priv, auth: auth,
		tr: &http.Transport{MaxIdleConnsPerHost: benchMaxIdle, IdleConnTimeout: 30 * time.Second}}
	mux := http.NewServeMux()
	mux.HandleFunc("/push/", s.push)
	mux.HandleFunc("/raw", s.raw)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *pushService) url() string { return "http://" + s.ln.Addr().String() }

func (s *pushService) push(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	now := time.Now()
	if s.arr != nil {
		s.arr.arrivedSealed(body, now)
	}
	w.Header().Set("Location", s.url()+"/m/"+s.run)
	w.WriteHeader(http.StatusCreated)
}

func (s *pushService) raw(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	w.Header().Set("Location", s.url()+"/m/raw")
	w.WriteHeader(http.StatusCreated)
}

// rawBody is random bytes of the size herald's encrypted message of body
// has.
func (s *pushService) rawBody(body []byte) []byte {
	b := make([]byte, len(body)+pushOverhead)
	_, _ = rand.Read(b)
	return b
}

// vapidLike stands in for the Authorization header's size (a VAPID JWT
// and key are about 340 characters).
var vapidLike = "vapid t=" + strings.Repeat("x", 250) + ", k=" + strings.Repeat("y", 87)

// rawWorker POSTs with the headers of a push message over a keep-alive
// transport shared by the workers.
func (s *pushService) rawWorker(context.Context) (func(context.Context, []byte) error, func(), error) {
	c := &http.Client{Transport: s.tr, Timeout: 30 * time.Second}
	publish := func(ctx context.Context, body []byte) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url()+"/raw", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Encoding", "aes128gcm")
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("TTL", "60")
		req.Header.Set("Urgency", "normal")
		req.Header.Set("Authorization", vapidLike)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return errors.New("push service answered " + resp.Status)
		}
		return nil
	}
	return publish, func() {}, nil
}

// benchMaxIdle keeps the raw phase's connections open between requests
// (at least the largest --concurrency).
const benchMaxIdle = 1024

func (s *pushService) consume(_ context.Context, a *arrivals) error {
	a.open = s.open
	s.arr = a
	return nil
}

func (s *pushService) connection(string) *client.ConnectionInput { return nil }

// destination is the browser's PushSubscription for the service's
// endpoint, urgency normal, a TTL of a minute.
func (s *pushService) destination(string) client.Destination {
	b64 := base64.RawURLEncoding.EncodeToString
	d := client.WebPushDestination(client.PushSubscription{
		Endpoint: s.url() + "/push/" + s.run,
		Keys:     client.PushKeys{P256DH: b64(s.priv.PublicKey().Bytes()), Auth: b64(s.auth)},
	})
	urgency, ttl := "normal", 60
	d.Urgency, d.TTLS = &urgency, &ttl
	return d
}

func (s *pushService) close() {
	_ = s.srv.Close()
	s.tr.CloseIdleConnections()
}

// open decrypts one aes128gcm message for the service's keys (RFC 8291
// §3.4 key derivation, RFC 8188 one record) and strips the padding.
func (s *pushService) open(body []byte) ([]byte, error) {
	if len(body) < pushOverhead {
		return nil, errors.New("message too short")
	}
	salt, idlen := body[:16], int(body[20])
	if idlen != 65 || len(body) < 21+idlen+17 {
		return nil, errors.New("bad aes128gcm header")
	}
	if rs := binary.BigEndian.Uint32(body[16:20]); int(rs) < len(body)-21-idlen {
		return nil, errors.New("more than one record")
	}
	asPub := body[21 : 21+idlen]
	peer, err := ecdh.P256().NewPublicKey(asPub)
	if err != nil {
		return nil, err
	}
	secret, err := s.priv.ECDH(peer)
	if err != nil {
		return nil, err
	}
	info := "WebPush: info\x00" + string(s.priv.PublicKey().Bytes()) + string(asPub)
	ikm, err := hkdf.Key(sha256.New, secret, s.auth, info, 32)
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
	blk, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(blk)
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, nonce, body[21+idlen:], nil)
	if err != nil {
		return nil, err
	}
	// The last record ends with the delimiter 0x02 and zero padding.
	i := len(plain) - 1
	for i >= 0 && plain[i] == 0 {
		i--
	}
	if i < 0 || plain[i] != 2 {
		return nil, errors.New("bad padding delimiter")
	}
	return plain[:i], nil
}
