package store

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldhq/herald/seal"
)

// VAPIDStore keeps herald's one VAPID key pair, the application server key
// of Web Push destinations (package destination/webpush). Every node signs
// with the same key, so it lives in the database, its private half sealed
// with the store's key ring like subscription secrets (nil ring: plain
// text). Both stores implement it; storetest.RunVAPID proves it on both.
type VAPIDStore interface {
	// VAPIDKeyEnsure stores params' key when none is stored and returns the
	// stored one: nodes starting together each propose a fresh key and all
	// end up with the first one inserted. A stored private key sealed under
	// another key of the ring than its first is re-sealed under the first
	// (after herald secrets rotate-key, the old key can then be dropped).
	VAPIDKeyEnsure(ctx context.Context, params *VAPIDKeyParams) (*VAPIDKey, error)
	// VAPIDKeyGet returns the stored key, or herald.ErrNotFound.
	VAPIDKeyGet(ctx context.Context) (*VAPIDKey, error)
	// VAPIDKeyReplace stores params' key in place of the stored one
	// (rotation; browsers subscribed with the old public key must
	// subscribe again) and returns it.
	VAPIDKeyReplace(ctx context.Context, params *VAPIDKeyParams) (*VAPIDKey, error)
}

// VAPIDKey is the stored key pair: PrivateKey the 32-byte P-256 scalar and
// PublicKey the 65-byte uncompressed point, both base64url without padding.
// PrivateKey is plain text here: the store seals and opens it.
type VAPIDKey struct {
	PrivateKey string
	PublicKey  string
	// CreatedAt is when the key was generated (or last rotated).
	CreatedAt time.Time
}

// VAPIDKeyParams is a key to store, generated at Now.
type VAPIDKeyParams struct {
	PrivateKey string
	PublicKey  string
	Now        time.Time
}

// VAPIDKeyAAD is the AES-GCM additional data of the sealed private key.
const VAPIDKeyAAD = "herald/vapid-private-key"

// VAPIDOpen opens a stored private key with keys. A value keys cannot open
// is an error naming the cause (the key that sealed it is not configured).
func VAPIDOpen(keys *seal.Ring, stored string) (string, error) {
	plain, err := keys.Open(stored, VAPIDKeyAAD)
	if err != nil {
		return "", fmt.Errorf("the VAPID private key cannot be read: %w (pass the --encryption-key it was encrypted with, or rotate it with herald webpush rotate-vapid)", err)
	}
	return plain, nil
}
