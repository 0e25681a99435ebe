package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/heraldhq/herald"
	webpushdest "github.com/heraldhq/herald/destination/webpush"
	"github.com/heraldhq/herald/store"
)

// vapidKeyRefresh is how long vapidKeys signs with the key it read before
// reading it again: after a rotation on one node, the others sign with
// the new key within this time.
const vapidKeyRefresh = time.Minute

// vapidKeys reads the installation's VAPID key from the store, generating
// it on first use (store.VAPIDStore.VAPIDKeyEnsure: nodes starting
// together agree on one). It implements webpushdest.KeySource and
// httpapi.WebPushKeys; it lives at the composition root because
// destination packages reach no store (depguard).
type vapidKeys struct {
	s   store.VAPIDStore
	now func() time.Time

	mu      sync.Mutex
	key     *webpushdest.VAPIDKey
	readAt  time.Time
	ensured bool
}

// newVAPIDKeys returns a vapidKeys reading s.
func newVAPIDKeys(s store.VAPIDStore) *vapidKeys {
	return &vapidKeys{s: s, now: time.Now}
}

// Ensure generates and stores the key pair unless one is stored (and
// re-seals it under the first encryption key), and returns the stored
// one. herald serve calls it at start.
func (k *vapidKeys) Ensure(ctx context.Context) (*webpushdest.VAPIDKey, error) {
	priv, pub, err := webpushdest.GenerateVAPIDKey()
	if err != nil {
		return nil, err
	}
	stored, err := k.s.VAPIDKeyEnsure(ctx, &store.VAPIDKeyParams{PrivateKey: priv, PublicKey: pub, Now: k.now()})
	if err != nil {
		return nil, err
	}
	return k.keep(stored)
}

// VAPIDKey returns the key, read again from the store every vapidKeyRefresh.
func (k *vapidKeys) VAPIDKey(ctx context.Context) (*webpushdest.VAPIDKey, error) {
	k.mu.Lock()
	key, at := k.key, k.readAt
	k.mu.Unlock()
	if key != nil && k.now().Sub(at) < vapidKeyRefresh {
		return key, nil
	}
	return k.load(ctx)
}

// PublicKey is the applicationServerKey pages subscribe with, read from
// the store on every call: a page must never be handed a key older than
// a rotation.
func (k *vapidKeys) PublicKey(ctx context.Context) (string, error) {
	key, err := k.load(ctx)
	if err != nil {
		return "", err
	}
	return key.Public, nil
}

// load reads the stored key (generating it when there is none yet) and
// caches it.
func (k *vapidKeys) load(ctx context.Context) (*webpushdest.VAPIDKey, error) {
	k.mu.Lock()
	ensured := k.ensured
	k.mu.Unlock()
	if !ensured {
		return k.Ensure(ctx)
	}
	stored, err := k.s.VAPIDKeyGet(ctx)
	if errors.Is(err, herald.ErrNotFound) {
		return k.Ensure(ctx)
	}
	if err != nil {
		return nil, err
	}
	return k.keep(stored)
}

// Rotate replaces the stored key pair with a new one. Browsers subscribed
// with the old public key must subscribe again: push services refuse
// messages signed with another key than the subscription's (401/403,
// which dead-letters them as rejected).
func (k *vapidKeys) Rotate(ctx context.Context) (*webpushdest.VAPIDKey, error) {
	priv, pub, err := webpushdest.GenerateVAPIDKey()
	if err != nil {
		return nil, err
	}
	stored, err := k.s.VAPIDKeyReplace(ctx, &store.VAPIDKeyParams{PrivateKey: priv, PublicKey: pub, Now: k.now()})
	if err != nil {
		return nil, err
	}
	return k.keep(stored)
}

func (k *vapidKeys) keep(stored *store.VAPIDKey) (*webpushdest.VAPIDKey, error) {
	key, err := webpushdest.ParseVAPIDKey(stored.PrivateKey, stored.PublicKey)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.key, k.readAt, k.ensured = key, k.now(), true
	k.mu.Unlock()
	return key, nil
}
