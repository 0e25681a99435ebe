package httpapi

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// unreadableSecrets marks every secret read through SubscriptionSecretList
// Unreadable, as a store does when a secret does not decrypt with the
// configured keys.
type unreadableSecrets struct{ store.Store }

func (s unreadableSecrets) SubscriptionSecretList(ctx context.Context, id string) ([]herald.Secret, error) {
	list, err := s.Store.SubscriptionSecretList(ctx, id)
	for i := range list {
		list[i].Value, list[i].Unreadable = "", true
	}
	return list, err
}

// TestSecretUnreadable: GET …/secret of a subscription whose secret does
// not decrypt answers 409 with what to do, never an empty secret; a
// rotation with grace 0 replaces it and answers with the new secret only.
func TestSecretUnreadable(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, unreadableSecrets{s})
		sub := ok[obj](t, b.do(t, http.MethodPost, "/v1/subscriptions", obj{"url": "https://example.com/a"}), http.StatusCreated)
		id := sub["id"].(string)

		e := requireError(t, b.do(t, http.MethodGet, "/v1/subscriptions/"+id+"/secret", nil), http.StatusConflict, herald.CodeConflict, "")
		require.Contains(t, e.Message, "--encryption-key")

		rot := ok[secretsJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions/"+id+"/secret/rotate", obj{"grace_period_s": 0}), http.StatusOK)
		require.NotEmpty(t, rot.Secret)
		for _, v := range rot.Secrets {
			require.NotEmpty(t, v.Secret, "an unreadable secret is not listed")
		}
	})
}
