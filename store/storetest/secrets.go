package storetest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/seal"
	"github.com/heraldhq/herald/store"
)

// SecretsBackend opens stores with different key rings on ONE database, as
// restarting herald with other --encryption-key values does.
type SecretsBackend struct {
	// Open returns a migrated store on the test's database sealing with
	// keys (nil: no encryption). It closes the store it returned before
	// (SQLite's data directory admits one).
	Open func(keys *seal.Ring) store.Store
	// RawSecrets reads the secret column of every subscription_secrets
	// row as stored, in row order (a test hook reading with SQL).
	RawSecrets func() []string
	// RawConnectionURLs reads the url column of every connection as
	// stored, in name order.
	RawConnectionURLs func() []string
}

// RunSecrets runs the secrets-at-rest suite (store/secrets.go).
func RunSecrets(t *testing.T, newBackend func(t *testing.T) *SecretsBackend) {
	t.Helper()
	for _, tt := range []struct {
		name string
		fn   func(t *testing.T, be *SecretsBackend)
	}{
		{"SealedAtRest", testSecretsSealedAtRest},
		{"PlainTextStillReads", testSecretsPlainTextStillReads},
		{"RotateKey", testSecretsRotateKey},
		{"CopyWithoutKey", testSecretsCopyWithoutKey},
		{"UnreadableIsolated", testSecretsUnreadableIsolated},
		{"ConnectionURLSealed", testConnectionURLSealed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newBackend(t))
		})
	}
}

func testRing(t *testing.T, fill ...byte) *seal.Ring {
	t.Helper()
	keys := make([][]byte, len(fill))
	for i, b := range fill {
		keys[i] = bytes.Repeat([]byte{b}, seal.KeySize)
	}
	r, err := seal.NewRing(keys...)
	require.NoError(t, err)
	return r
}

// secretsBundle is a store of the backend plus the plain secrets written.
type secretsBundle struct {
	*bundle
	be      *SecretsBackend
	secrets map[string][]string // subscription id → secrets, newest first
}

func setupSecrets(t *testing.T, be *SecretsBackend, keys *seal.Ring) *secretsBundle {
	t.Helper()
	return &secretsBundle{bundle: &bundle{ctx: t.Context(), store: be.Open(keys)}, be: be, secrets: map[string][]string{}}
}

// reopen "restarts" on the same data with keys.
func (b *secretsBundle) reopen(keys *seal.Ring) { b.store = b.be.Open(keys) }

// create makes n subscriptions, each with a rotated secret (two rows).
func (b *secretsBundle) create(t *testing.T, n int) {
	t.Helper()
	for range n {
		first, second := newSecret(), newSecret()
		sub := newSubscription()
		_, err := b.store.SubscriptionCreate(b.ctx, &store.SubscriptionCreateParams{Subscription: sub, Secret: first, Now: now})
		require.NoError(t, err)
		require.NoError(t, b.store.SubscriptionSecretRotate(b.ctx, &store.SubscriptionSecretRotateParams{
			ID: sub.ID, NewSecret: second, GraceUntil: now.Add(time.Hour), Now: now.Add(time.Millisecond)}))
		b.secrets[sub.ID] = []string{second, first}
	}
}

// requireReadable checks every read path gives the plain secrets back.
func (b *secretsBundle) requireReadable(t *testing.T) {
	t.Helper()
	all, err := b.store.SubscriptionListAll(b.ctx)
	require.NoError(t, err)
	for id, want := range b.secrets {
		list, err := b.store.SubscriptionSecretList(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, secretValues(list))
		require.Equal(t, want, secretValues(all.Secrets[id]))
	}
	// The claim path loads secrets on its own.
	var subIDs []string
	for id := range b.secrets {
		subIDs = append(subIDs, id)
	}
	_, ids := b.publish(t, now, subIDs...)
	claimed := b.claim(t, store.DeliveryClaimParams{Tier: 0, Now: now.Add(time.Second)})
	require.Len(t, claimed, len(ids))
	for _, c := range claimed {
		require.Equal(t, b.secrets[c.Delivery.SubscriptionID], secretValues(c.Secrets))
	}
}

func secretValues(secs []herald.Secret) []string {
	out := make([]string, len(secs))
	for i, s := range secs {
		out[i] = s.Value
	}
	return out
}

// requireRaw checks every stored value is sealed under key id.
func (b *secretsBundle) requireRaw(t *testing.T, id string) {
	t.Helper()
	raw := b.be.RawSecrets()
	require.NotEmpty(t, raw)
	for _, v := range raw {
		require.Equal(t, id, seal.KeyIDOf(v), "stored value %q", v)
		require.NotContains(t, v, "whsec_")
		for _, secs := range b.secrets {
			for _, s := range secs {
				require.NotContains(t, v, strings.TrimPrefix(s, "whsec_"))
			}
		}
	}
}

func (b *secretsBundle) reseal(t *testing.T, limit int) (resealed int) {
	t.Helper()
	keeper := b.store.(store.SecretKeeper)
	var after int64
	for {
		res, err := keeper.SecretReseal(b.ctx, &store.SecretResealParams{After: after, Limit: limit})
		require.NoError(t, err)
		require.Zero(t, res.Raced)
		resealed += res.Resealed
		after = res.Next
		if res.Done {
			return resealed
		}
	}
}

func testSecretsSealedAtRest(t *testing.T, be *SecretsBackend) {
	a := testRing(t, 1)
	b := setupSecrets(t, be, a)
	b.create(t, 3)
	b.requireRaw(t, a.PrimaryID())
	b.requireReadable(t)
	counts, err := b.store.(store.SecretKeeper).SecretKeyCounts(b.ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{a.PrimaryID(): 6}, counts)
	require.NoError(t, store.CheckSecretKeys(b.ctx, b.store.(store.SecretKeeper), a))
}

func testSecretsPlainTextStillReads(t *testing.T, be *SecretsBackend) {
	b := setupSecrets(t, be, nil)
	b.create(t, 2)
	for _, v := range b.be.RawSecrets() {
		require.True(t, strings.HasPrefix(v, "whsec_"), "no key, plain text: %q", v)
	}
	require.NoError(t, store.CheckSecretKeys(b.ctx, b.store.(store.SecretKeeper), nil))

	// Encryption turned on later: old rows read as they are, new ones are
	// sealed, and the reseal pass seals the rest.
	a := testRing(t, 1)
	b.reopen(a)
	require.NoError(t, store.CheckSecretKeys(b.ctx, b.store.(store.SecretKeeper), a))
	b.requireReadable(t)
	require.Equal(t, 4, b.reseal(t, 3))
	b.requireRaw(t, a.PrimaryID())
	b.requireReadable(t)
}

func testSecretsRotateKey(t *testing.T, be *SecretsBackend) {
	a, ba, onlyB := testRing(t, 1), testRing(t, 2, 1), testRing(t, 2)
	b := setupSecrets(t, be, a)
	b.create(t, 4)

	// The new key first, the old one still decrypting.
	b.reopen(ba)
	b.requireReadable(t)
	b.create(t, 1) // sealed under the new key already
	keeper := b.store.(store.SecretKeeper)
	counts, err := keeper.SecretKeyCounts(b.ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{a.PrimaryID(): 8, ba.PrimaryID(): 2}, counts)

	// Batches of 3 over 10 rows: 8 rewritten, resumable from any cursor.
	require.Equal(t, 8, b.reseal(t, 3))
	b.requireRaw(t, ba.PrimaryID())
	require.Zero(t, b.reseal(t, 0), "a second pass has nothing to do")

	// The old key can go.
	b.reopen(onlyB)
	require.NoError(t, store.CheckSecretKeys(b.ctx, b.store.(store.SecretKeeper), onlyB))
	b.requireReadable(t)

	// Only the old key: refused, naming the key it lacks.
	b.reopen(a)
	err = store.CheckSecretKeys(b.ctx, b.store.(store.SecretKeeper), a)
	require.ErrorContains(t, err, "encrypted with key "+ba.PrimaryID())
	require.ErrorContains(t, err, "not among --encryption-key")
}

func testSecretsCopyWithoutKey(t *testing.T, be *SecretsBackend) {
	a := testRing(t, 1)
	b := setupSecrets(t, be, a)
	b.create(t, 2)
	var id string
	for id = range b.secrets {
		break
	}

	for _, tt := range []struct {
		name string
		keys *seal.Ring
	}{
		{"no key", nil},
		{"another key", testRing(t, 3)},
	} {
		b.reopen(tt.keys)
		keeper := b.store.(store.SecretKeeper)
		require.Error(t, store.CheckSecretKeys(b.ctx, keeper, tt.keys), tt.name)
		// Reads go on (one bad row must not fail reads of others), but
		// every secret is unreadable and carries no value.
		list, err := b.store.SubscriptionSecretList(b.ctx, id)
		require.NoError(t, err, tt.name)
		requireUnreadable(t, list)
		all, err := b.store.SubscriptionListAll(b.ctx)
		require.NoError(t, err, tt.name)
		requireUnreadable(t, all.Secrets[id])
		if tt.keys != nil {
			// A rotation with the wrong key rewrites nothing and lists
			// every row as unreadable.
			res, err := keeper.SecretReseal(b.ctx, &store.SecretResealParams{})
			require.NoError(t, err, tt.name)
			require.Zero(t, res.Resealed, tt.name)
			require.Len(t, res.Unreadable, len(b.be.RawSecrets()), tt.name)
		}
	}
}

func requireUnreadable(t *testing.T, secs []herald.Secret) {
	t.Helper()
	require.NotEmpty(t, secs)
	for _, s := range secs {
		require.True(t, s.Unreadable)
		require.Empty(t, s.Value)
	}
}

// testSecretsUnreadableIsolated: a subscription whose secret does not open
// (sealed under a key no longer configured) stalls only itself. The
// fan-out cache load and a claim spanning both subscriptions succeed; the
// other subscription's secrets read as usual.
func testSecretsUnreadableIsolated(t *testing.T, be *SecretsBackend) {
	a, bk := testRing(t, 1), testRing(t, 2)
	b := setupSecrets(t, be, a)
	b.create(t, 1)
	var bad string
	for bad = range b.secrets {
	}
	b.reopen(bk)
	good := &secretsBundle{bundle: b.bundle, be: be, secrets: map[string][]string{}}
	good.create(t, 1)
	var goodID string
	for goodID = range good.secrets {
	}

	all, err := b.store.SubscriptionListAll(b.ctx)
	require.NoError(t, err)
	requireUnreadable(t, all.Secrets[bad])
	require.Equal(t, good.secrets[goodID], secretValues(all.Secrets[goodID]))

	// A rotation goes past the bad rows (listed, left as they were); the
	// good subscription's are already under the first key.
	raw := b.be.RawSecrets()
	res, err := b.store.(store.SecretKeeper).SecretReseal(b.ctx, &store.SecretResealParams{})
	require.NoError(t, err)
	require.Len(t, res.Unreadable, len(b.secrets[bad]))
	for _, r := range res.Unreadable {
		require.Equal(t, bad, r.SubscriptionID)
	}
	require.Zero(t, res.Resealed, "the good subscription's secrets are already under the first key")
	require.Equal(t, raw, b.be.RawSecrets(), "nothing rewritten")

	_, ids := b.publish(t, now, bad, goodID)
	claimed := b.claim(t, store.DeliveryClaimParams{Tier: 0, Now: now.Add(time.Second)})
	require.Len(t, claimed, len(ids))
	for _, c := range claimed {
		if c.Delivery.SubscriptionID == bad {
			requireUnreadable(t, c.Secrets)
		} else {
			require.Equal(t, good.secrets[goodID], secretValues(c.Secrets))
		}
	}
}
