package push

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash"
	"sync"
	"time"

	"github.com/fernet/fernet-go"
)

// sealer makes Fernet tokens (the spec's version 0x80 layout: version,
// big-endian seconds, IV, AES-128-CBC with PKCS#7 padding, HMAC-SHA256 of
// all that) with one key, keeping the AES key schedule and the keyed HMAC
// state between tokens. fernet-go's EncryptAndSign derives both anew for
// every token; a push send makes one token (the message id) and that setup
// was most of its cost (issue 25). Tokens are still read by fernet-go
// (Keys.decrypt), and TestSealerTokensReadByFernet holds the two together.
type sealer struct {
	block cipher.Block
	macs  sync.Pool // of hash.Hash keyed with the signing half
}

func newSealer(k *fernet.Key) *sealer {
	// A Fernet key is 16 bytes of signing key, then 16 of encryption key.
	block, err := aes.NewCipher(k[16:])
	if err != nil {
		panic("push: AES-128 key: " + err.Error()) // 16 bytes: cannot fail
	}
	sign := append([]byte(nil), k[:16]...)
	s := &sealer{block: block}
	s.macs.New = func() any { return hmac.New(sha256.New, sign) }
	return s
}

const (
	fernetVersion   = 0x80
	fernetHeaderLen = 1 + 8 + aes.BlockSize // version, time, IV
)

// seal returns the token of msg at now, in unpadded URL-safe base64 (the
// form autopush sends).
func (s *sealer) seal(msg []byte, now time.Time) (string, error) {
	padded := (len(msg)/aes.BlockSize + 1) * aes.BlockSize
	var stack [256]byte
	var raw []byte
	if n := fernetHeaderLen + padded + sha256.Size; n <= len(stack) {
		raw = stack[:n]
	} else {
		raw = make([]byte, n)
	}
	raw[0] = fernetVersion
	binary.BigEndian.PutUint64(raw[1:9], uint64(now.Unix()))
	iv := raw[9:fernetHeaderLen]
	if _, err := rand.Read(iv); err != nil {
		return "", err
	}
	body := raw[fernetHeaderLen : fernetHeaderLen+padded]
	copy(body, msg)
	pad := byte(padded - len(msg))
	for i := len(msg); i < padded; i++ {
		body[i] = pad
	}
	cipher.NewCBCEncrypter(s.block, iv).CryptBlocks(body, body)
	mac := s.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write(raw[:fernetHeaderLen+padded])
	mac.Sum(raw[:fernetHeaderLen+padded])
	s.macs.Put(mac)
	return base64.RawURLEncoding.EncodeToString(raw), nil
}
