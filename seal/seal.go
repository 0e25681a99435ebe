package seal

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Format constants.
const (
	// Prefix starts every sealed value; values without it are plain text.
	Prefix = "enc:"
	// prefixV1 is the only version so far.
	prefixV1 = "enc:v1:"
	// KeySize is the key length: AES-256.
	KeySize = 32
	// KeyIDLen is the length of a key id in hex digits.
	KeyIDLen = 8
	// HeaderLen is the length of "enc:v1:<key id>:", the part of a sealed
	// value that names its key (stores group by it in SQL).
	HeaderLen = len(prefixV1) + KeyIDLen + 1
	// maxKeys bounds a ring: a handful during a rotation is normal.
	maxKeys = 16
)

// Errors. Open wraps them with the key id involved.
var (
	// ErrNoKey: a sealed value was read without any key configured.
	ErrNoKey = errors.New("seal: value is encrypted but no encryption key is configured")
	// ErrUnknownKey: a value was sealed with a key that is not in the ring.
	ErrUnknownKey = errors.New("seal: value was encrypted with a key that is not in the key ring")
	// ErrMalformed: a value has the prefix but not the format.
	ErrMalformed = errors.New("seal: malformed encrypted value")
	// ErrDecrypt: the key matched by id but authentication failed (the
	// value was altered, or moved to another row).
	ErrDecrypt = errors.New("seal: value does not decrypt (altered, or copied from another row)")
)

// Value is a parsed sealed value.
type Value struct {
	// KeyID names the key that sealed it.
	KeyID string
	// Data is nonce ‖ ciphertext ‖ tag.
	Data []byte
}

// IsSealed reports whether v carries the sealed-value prefix.
func IsSealed(v string) bool { return strings.HasPrefix(v, Prefix) }

// Parse parses a sealed value. ok is false for plain text (no prefix);
// err is set when the prefix is there but the rest is not the format.
func Parse(v string) (val Value, ok bool, err error) {
	if !IsSealed(v) {
		return Value{}, false, nil
	}
	if !strings.HasPrefix(v, prefixV1) || len(v) < HeaderLen || v[HeaderLen-1] != ':' {
		return Value{}, true, ErrMalformed
	}
	id := v[len(prefixV1) : HeaderLen-1]
	if !validKeyID(id) {
		return Value{}, true, ErrMalformed
	}
	data, err := base64.RawURLEncoding.Strict().DecodeString(v[HeaderLen:])
	if err != nil || len(data) < nonceSize+tagSize {
		return Value{}, true, ErrMalformed
	}
	return Value{KeyID: id, Data: data}, true, nil
}

// KeyIDOf returns the key id in the header of a sealed value, or "" for
// plain text or a value too short to have one.
func KeyIDOf(v string) string {
	if !strings.HasPrefix(v, prefixV1) || len(v) < HeaderLen {
		return ""
	}
	id := v[len(prefixV1) : HeaderLen-1]
	if !validKeyID(id) {
		return ""
	}
	return id
}

func validKeyID(id string) bool {
	if len(id) != KeyIDLen {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

const (
	nonceSize = 12
	tagSize   = 16
)

// KeyID returns the id of a key: hex of the first bytes of
// SHA-256("herald seal key id\x00" ‖ key). 32 bits tell a few keys apart
// and reveal nothing usable about a 256-bit key.
func KeyID(key []byte) string {
	h := sha256.Sum256(append([]byte("herald seal key id\x00"), key...))
	return hex.EncodeToString(h[:KeyIDLen/2])
}

type ringKey struct {
	id   string
	aead cipher.AEAD
}

// Ring is a key ring. The zero of *Ring (nil) is "no encryption": Seal
// returns plain text and Open refuses sealed values with ErrNoKey.
type Ring struct {
	keys []ringKey
}

// NewRing builds a ring from raw 32-byte keys; keys[0] encrypts.
func NewRing(keys ...[]byte) (*Ring, error) {
	if len(keys) == 0 {
		return nil, errors.New("seal: a key ring needs at least one key")
	}
	if len(keys) > maxKeys {
		return nil, fmt.Errorf("seal: at most %d keys, got %d", maxKeys, len(keys))
	}
	r := &Ring{}
	seen := map[string]bool{}
	for i, k := range keys {
		if len(k) != KeySize {
			return nil, fmt.Errorf("seal: key %d is %d bytes, want %d (base64 of 32 random bytes: herald secrets generate-key)", i+1, len(k), KeySize)
		}
		id := KeyID(k)
		if seen[id] {
			return nil, fmt.Errorf("seal: key %d (id %s) is given twice", i+1, id)
		}
		seen[id] = true
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		r.keys = append(r.keys, ringKey{id: id, aead: aead})
	}
	return r, nil
}

// ParseKey decodes one key: base64 (standard or URL alphabet, padded or
// not) of exactly 32 bytes.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != KeySize {
				return nil, fmt.Errorf("seal: key decodes to %d bytes, want %d", len(b), KeySize)
			}
			return b, nil
		}
	}
	return nil, errors.New("seal: key is not base64 (generate one with herald secrets generate-key)")
}

// ParseKeyList decodes comma-separated keys (the --encryption-key form).
// Empty items are ignored.
func ParseKeyList(s string) ([][]byte, error) {
	var out [][]byte
	for i, p := range strings.Split(s, ",") {
		if strings.TrimSpace(p) == "" {
			continue
		}
		k, err := ParseKey(p)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		out = append(out, k)
	}
	return out, nil
}

// ParseKeyFile decodes a key file: one key per line, first line first;
// blank lines and lines starting with # are ignored.
func ParseKeyFile(data []byte) ([][]byte, error) {
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := ParseKey(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, k)
	}
	return out, sc.Err()
}

// GenerateKey returns a new random key in the form ParseKey reads.
func GenerateKey() (string, error) {
	var b [KeySize]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b[:]), nil
}

// PrimaryID is the id of the encrypting key ("" for a nil ring).
func (r *Ring) PrimaryID() string {
	if r == nil {
		return ""
	}
	return r.keys[0].id
}

// IDs lists the ring's key ids, the encrypting one first.
func (r *Ring) IDs() []string {
	if r == nil {
		return nil
	}
	ids := make([]string, len(r.keys))
	for i, k := range r.keys {
		ids[i] = k.id
	}
	return ids
}

// Has reports whether the ring holds the key with this id.
func (r *Ring) Has(id string) bool {
	return r.key(id) != nil
}

func (r *Ring) key(id string) *ringKey {
	if r == nil {
		return nil
	}
	for i := range r.keys {
		if r.keys[i].id == id {
			return &r.keys[i]
		}
	}
	return nil
}

// Seal encrypts plaintext under the first key, bound to aad. A nil ring
// returns plaintext unchanged (encryption off).
func (r *Ring) Seal(plaintext, aad string) (string, error) {
	if r == nil {
		return plaintext, nil
	}
	k := r.keys[0]
	nonce := make([]byte, nonceSize, nonceSize+len(plaintext)+tagSize)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	data := k.aead.Seal(nonce, nonce, []byte(plaintext), []byte(aad))
	return prefixV1 + k.id + ":" + base64.RawURLEncoding.EncodeToString(data), nil
}

// Open returns the plaintext of a stored value: plain text unchanged, a
// sealed value decrypted with the key its header names and checked
// against aad.
func (r *Ring) Open(stored, aad string) (string, error) {
	v, ok, err := Parse(stored)
	if !ok {
		return stored, nil
	}
	if err != nil {
		return "", err
	}
	if r == nil {
		return "", fmt.Errorf("%w (it was encrypted with key %s)", ErrNoKey, v.KeyID)
	}
	k := r.key(v.KeyID)
	if k == nil {
		return "", fmt.Errorf("%w (key %s; the ring has %s)", ErrUnknownKey, v.KeyID, strings.Join(r.IDs(), ", "))
	}
	pt, err := k.aead.Open(nil, v.Data[:nonceSize], v.Data[nonceSize:], []byte(aad))
	if err != nil {
		return "", fmt.Errorf("%w (key %s)", ErrDecrypt, v.KeyID)
	}
	return string(pt), nil
}

// Current reports whether stored needs no re-encryption: it is sealed
// under the first key, or the ring is nil (nothing to encrypt with).
func (r *Ring) Current(stored string) bool {
	if r == nil {
		return true
	}
	return KeyIDOf(stored) == r.keys[0].id
}
