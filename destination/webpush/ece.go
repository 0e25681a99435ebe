package webpushdest

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
	"fmt"
	"strings"

	"github.com/heraldhq/herald"
)

// Sizes of an RFC 8291 message (aes128gcm, RFC 8188).
const (
	// MaxBody is the largest body sent: a push service need not accept
	// more (RFC 8030 §7.2).
	MaxBody = 4096
	// headerLen is salt (16) ‖ rs (4) ‖ idlen (1) ‖ keyid, the sender's
	// 65-byte uncompressed public key.
	headerLen = 16 + 4 + 1 + 65
	// tagLen is the AES-GCM tag, delimiterLen the 0x02 that ends the only
	// record.
	tagLen       = 16
	delimiterLen = 1
	// MaxPlaintext is the largest payload that fits MaxBody with the
	// minimum padding: 4096 − 86 − 1 − 16 = 3993 bytes (RFC 8291 §4).
	MaxPlaintext = MaxBody - headerLen - delimiterLen - tagLen
	// recordSize is the rs the header declares: the one record
	// (plaintext, delimiter, tag) is never longer.
	recordSize = MaxBody
)

// ErrTooLarge is returned (wrapped, with the size) for a payload over
// MaxPlaintext.
var ErrTooLarge = errors.New("payload too large for a Web Push message")

// Keys are a user agent's keys, decoded and checked.
type Keys struct {
	// Public is the user agent's P-256 key (p256dh).
	Public *ecdh.PublicKey
	// Auth is the 16-byte authentication secret.
	Auth []byte
}

// ParseKeys decodes a PushSubscription's keys by the API's rules
// (herald.PushPublicKey, herald.PushAuthSecret): p256dh an uncompressed
// P-256 point and auth 16 bytes, both base64url, padded or not.
func ParseKeys(p256dh, auth string) (*Keys, error) {
	pub, err := herald.PushPublicKey(p256dh)
	if err != nil {
		return nil, fmt.Errorf("keys.p256dh %w", err)
	}
	a, err := herald.PushAuthSecret(auth)
	if err != nil {
		return nil, fmt.Errorf("keys.auth %w", err)
	}
	return &Keys{Public: pub, Auth: a}, nil
}

// decodeB64 reads base64url or standard base64, padded or not (VAPID
// keys as web-push libraries print them).
func decodeB64(s string) ([]byte, error) {
	s = strings.TrimRight(strings.TrimSpace(s), "=")
	s = strings.NewReplacer("+", "-", "/", "_").Replace(s)
	return base64.RawURLEncoding.DecodeString(s)
}

// Encrypt seals plaintext for k as one aes128gcm record (RFC 8291), with a
// fresh ephemeral key and salt, and the minimum padding (none beyond the
// delimiter): the body is len(plaintext) + 103 bytes. A plaintext over
// MaxPlaintext is ErrTooLarge.
func Encrypt(k *Keys, plaintext []byte) ([]byte, error) {
	eph, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	return encrypt(k, plaintext, eph, salt)
}

// encrypt is Encrypt with the ephemeral key and salt given (the RFC 8291
// test vector fixes them).
func encrypt(k *Keys, plaintext []byte, eph *ecdh.PrivateKey, salt []byte) ([]byte, error) {
	if len(plaintext) > MaxPlaintext {
		return nil, fmt.Errorf("%w: %d bytes, at most %d fit the %d-byte record", ErrTooLarge, len(plaintext), MaxPlaintext, MaxBody)
	}
	secret, err := eph.ECDH(k.Public)
	if err != nil {
		return nil, err
	}
	asPublic := eph.PublicKey().Bytes()
	uaPublic := k.Public.Bytes()
	// IKM = HKDF(auth, ecdh_secret, "WebPush: info" 0x00 ‖ ua_public ‖ as_public, 32)
	info := make([]byte, 0, 14+65+65)
	info = append(append(append(info, "WebPush: info\x00"...), uaPublic...), asPublic...)
	ikm, err := hkdf.Key(sha256.New, secret, k.Auth, string(info), 32)
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
	body := make([]byte, headerLen, headerLen+len(plaintext)+delimiterLen+tagLen)
	copy(body, salt)
	binary.BigEndian.PutUint32(body[16:], recordSize)
	body[20] = byte(len(asPublic))
	copy(body[21:], asPublic)
	// The record: plaintext ‖ 0x02 (last record), sealed in place after
	// the header. plaintext is copied, never written to: one payload may
	// go to many subscriptions at once.
	record := append(body[headerLen:], plaintext...)
	record = append(record, 0x02)
	return gcm.Seal(body[:headerLen], nonce, record, nil), nil
}
