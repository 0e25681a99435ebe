package httpapi

import (
	"bytes"
	"net/http"
	"slices"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// A subscription's signing secrets: GET /v1/subscriptions/{id}/secret and
// POST /v1/subscriptions/{id}/secret/rotate.

type secretJSON struct {
	Secret    string  `json:"secret"`
	CreatedAt string  `json:"created_at"`
	ExpiresAt *string `json:"expires_at"`
}

// secretsJSON answers GET …/secret and rotate: "secret" is the newest
// (the one to configure in a receiver), "secrets" every one still signing,
// newest first, so a receiver can verify across the grace period.
type secretsJSON struct {
	Secret  string       `json:"secret"`
	Secrets []secretJSON `json:"secrets"`
}

// Secrets the store could not decrypt (herald.Secret.Unreadable) are left
// out: their value is unknown.
func secretsView(list []herald.Secret, now time.Time) secretsJSON {
	out := secretsJSON{Secrets: []secretJSON{}}
	for _, sec := range list {
		if !sec.Active(now) || sec.Unreadable {
			continue
		}
		v := secretJSON{Secret: sec.Value, CreatedAt: timestamp(sec.CreatedAt)}
		if sec.ExpiresAt != nil {
			e := timestamp(*sec.ExpiresAt)
			v.ExpiresAt = &e
		}
		out.Secrets = append(out.Secrets, v)
	}
	if len(out.Secrets) > 0 {
		out.Secret = out.Secrets[0].Secret
	}
	return out
}

func (s *server) subscriptionSecretGet(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.confineSubscription(r, id); err != nil {
		return err
	}
	list, err := s.store.SubscriptionSecretList(r.Context(), id)
	if err != nil {
		return notFound(err, "subscription", id)
	}
	if slices.ContainsFunc(list, func(sec herald.Secret) bool { return sec.Unreadable && sec.Active(s.now()) }) {
		return herald.Errorf(herald.CodeConflict, "a signing secret of subscription %s does not decrypt with the configured --encryption-key; "+
			"its deliveries fail with secret_unreadable until the key is fixed, or the secret is rotated with grace_period_s 0", id)
	}
	noStore(w)
	return s.reply(w, http.StatusOK, secretsView(list, s.now()))
}

// subscriptionSecretRotate adds a new secret (the body's, or a generated
// one) and lets the older ones sign for grace_period_s more seconds
// (default Config.SecretGrace, at most 30 days; 0 retires them at once).
func (s *server) subscriptionSecretRotate(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.confineSubscription(r, id); err != nil {
		return err
	}
	body, err := readBody(w, r, s.smallLimit(SmallBodyBytes))
	if err != nil {
		return err
	}
	secret, grace := "", s.cfg.SecretGrace
	if len(bytes.TrimSpace(body)) > 0 {
		o, err := parseBody(body)
		if err != nil {
			return err
		}
		if err := o.allow("secret", "grace_period_s"); err != nil {
			return err
		}
		in := &subscriptionInput{}
		if err := decodeSecret(o, in); err != nil {
			return err
		}
		secret = in.secret
		var sec int64
		set, err := o.integer("grace_period_s", &sec)
		if err != nil {
			return err
		}
		if set {
			if sec < 0 || sec > maxSecretGraceS {
				return invalid("grace_period_s", "must be from 0 to %d seconds", maxSecretGraceS)
			}
			grace = time.Duration(sec) * time.Second
		}
	}
	if secret == "" {
		secret = webhook.NewSecret()
	}
	now := s.now()
	err = s.store.SubscriptionSecretRotate(r.Context(), &store.SubscriptionSecretRotateParams{
		ID: id, NewSecret: secret, GraceUntil: now.Add(grace), Now: now,
	})
	if err != nil {
		return notFound(err, "subscription", id)
	}
	list, err := s.store.SubscriptionSecretList(r.Context(), id)
	if err != nil {
		return notFound(err, "subscription", id)
	}
	out := secretsView(list, now)
	// Answer with the secret this call made even if the store's order ties
	// it with an older one created in the same instant.
	out.Secret = secret
	if i := slices.IndexFunc(out.Secrets, func(v secretJSON) bool { return v.Secret == secret }); i > 0 {
		v := out.Secrets[i]
		out.Secrets = slices.Delete(out.Secrets, i, i+1)
		out.Secrets = slices.Insert(out.Secrets, 0, v)
	}
	noStore(w)
	return s.reply(w, http.StatusOK, out)
}
