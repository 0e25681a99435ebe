package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/seal"
)

// Secrets at rest (docs/adr/0014-secrets-at-rest.md). Both stores take a
// *seal.Ring in their Config: subscription secrets are sealed on write and
// opened on read inside the store, so every reader (the API, the fan-out
// cache, claims) sees plain text and nothing above the store changes. A nil
// ring stores plain text, as before.

// SecretOpen decrypts sec.Value in place with keys (nil keys: plain text).
// A value the keys cannot open marks the secret Unreadable instead of
// failing the read: claims and the fan-out cache read many subscriptions at
// once, and one bad row must stall only its own subscription's deliveries
// (which then fail with herald.ErrorSecretUnreadable), not every one.
func SecretOpen(keys *seal.Ring, sec *herald.Secret, subscriptionID string) {
	plain, err := keys.Open(sec.Value, SecretAAD(subscriptionID))
	if err != nil {
		sec.Value, sec.Unreadable = "", true
		return
	}
	sec.Value = plain
}

// SecretKeyIDOf is the key id SecretKeyCounts reports for a row whose
// stored value starts with header (its first seal.HeaderLen characters
// when sealed, "" for plain text): "" for plain text, "malformed" for a
// sealed-looking header that names no key.
func SecretKeyIDOf(header string) string {
	id := seal.KeyIDOf(header)
	if header != "" && id == "" {
		return "malformed"
	}
	return id
}

// SecretResealValue returns the stored value of a subscription's secret
// sealed under keys' first key, and false when it already is (nothing to
// rewrite). A value keys cannot open is an error (the stores list it in
// SecretResealResult.Unreadable and go on with the other rows).
func SecretResealValue(keys *seal.Ring, stored, subscriptionID string) (string, bool, error) {
	if keys.Current(stored) {
		return "", false, nil
	}
	aad := SecretAAD(subscriptionID)
	plain, err := keys.Open(stored, aad)
	if err != nil {
		return "", false, fmt.Errorf("secret of subscription %s: %w", subscriptionID, err)
	}
	sealed, err := keys.Seal(plain, aad)
	if err != nil {
		return "", false, err
	}
	return sealed, true, nil
}

// SecretAAD is the AES-GCM additional data of a subscription's secret: it
// binds the ciphertext to the subscription, so a value copied to another
// subscription's row does not open.
func SecretAAD(subscriptionID string) string { return "herald/subscription-secret/" + subscriptionID }

// DefaultResealBatch is how many secret rows one SecretReseal transaction
// scans: small enough that a batch holds the SQLite writer (or PostgreSQL
// row locks) for milliseconds while herald serves.
const DefaultResealBatch = 500

// SecretKeeper is implemented by both stores: the maintenance side of
// encrypted secrets (herald serve's start check, herald secrets
// rotate-key). It is apart from Store so test doubles need not grow.
type SecretKeeper interface {
	// SecretKeyCounts counts stored secret rows (of every subscription,
	// deleted ones too) and connection URLs (store/connection.go) by the
	// id of the key that sealed them; plain-text rows count under "".
	SecretKeyCounts(ctx context.Context) (map[string]int64, error)
	// SecretReseal re-seals, under the ring's first key, the secret rows
	// with id > After (at most Limit rows scanned, in id order, in one
	// transaction) that are plain text or sealed under another key. Each
	// row is rewritten with a compare-and-set on its old value, so a
	// concurrent change is never overwritten (it is counted in Raced and
	// left for a later pass). A row no key of the ring opens (altered in
	// the database) is left as it is and listed in Unreadable: one bad row
	// must not stop the rotation of every other. Without a ring it is an
	// error.
	SecretReseal(ctx context.Context, params *SecretResealParams) (*SecretResealResult, error)
	// ConnectionReseal re-seals, under the ring's first key, every
	// connection URL that is plain text or sealed under another key, in
	// one transaction (connections are few), each with a compare-and-set
	// on its old value like SecretReseal. A URL no key opens is left as it
	// is and named in Unreadable. Without a ring it is an error.
	ConnectionReseal(ctx context.Context) (*ConnectionResealResult, error)
}

// ConnectionResealResult reports a ConnectionReseal.
type ConnectionResealResult struct {
	// Scanned connections, of which Resealed were rewritten and Raced
	// changed meanwhile (left for a later pass).
	Scanned, Resealed, Raced int
	// Unreadable names the connections whose URL no key opens.
	Unreadable []string
}

// SecretResealParams is one batch of SecretReseal.
type SecretResealParams struct {
	// After is the cursor: the last row id of the previous batch (0 first).
	After int64
	// Limit is the most rows scanned (DefaultResealBatch when ≤ 0).
	Limit int
}

// SecretRow names one stored secret row.
type SecretRow struct {
	ID             int64
	SubscriptionID string
}

// SecretResealResult reports one batch.
type SecretResealResult struct {
	// Next is the cursor for the next batch.
	Next int64
	// Scanned rows, of which Resealed were rewritten and Raced changed
	// under the batch (left as they were).
	Scanned, Resealed, Raced int
	// Unreadable lists the rows of the batch that no key opens.
	Unreadable []SecretRow
	// Done is set when the scan reached the end of the table.
	Done bool
}

// CheckSecretKeys fails when some stored secret cannot be opened with ring:
// it was sealed with a key the ring lacks, or ring is nil and secrets are
// sealed. herald refuses to start then rather than sign deliveries with
// secrets it cannot read. It checks key ids, not every ciphertext.
func CheckSecretKeys(ctx context.Context, s SecretKeeper, ring *seal.Ring) error {
	counts, err := s.SecretKeyCounts(ctx)
	if err != nil {
		return fmt.Errorf("error reading stored secrets: %w", err)
	}
	var missing []string
	for _, id := range slices.Sorted(maps.Keys(counts)) {
		if id != "" && !ring.Has(id) {
			missing = append(missing, fmt.Sprintf("%s (%d secrets)", id, counts[id]))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if ring == nil {
		return fmt.Errorf("the stored subscription secrets are encrypted with key %s, and no encryption key is configured: pass --encryption-key or --encryption-key-file",
			strings.Join(missing, ", "))
	}
	return fmt.Errorf("the stored subscription secrets were encrypted with key %s, which is not among --encryption-key / --encryption-key-file (configured: %s)",
		strings.Join(missing, ", "), strings.Join(ring.IDs(), ", "))
}
