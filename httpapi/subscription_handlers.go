package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// timestamp renders t as RFC 3339 in UTC.
func timestamp(t time.Time) string {
	return t.UTC().Format(time.RFC3339Nano)
}

// noStore marks an answer that holds a secret: no cache may keep it.
func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
}

func (s *server) subscriptionCreate(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	in, err := decodeSubscription(body)
	if err != nil {
		return err
	}
	if own := principalOf(r).Tenant; own != "" {
		if in.sub.Tenant != "" && in.sub.Tenant != own {
			return errOtherTenant(own)
		}
		if in.sub.AllTenants {
			return herald.Errorf(herald.CodeForbidden, "a token confined to a tenant cannot create an all_tenants subscription")
		}
		in.sub.Tenant = own
	}
	secret := in.secret
	if secret == "" {
		secret = webhook.NewSecret()
	}
	now := s.now()
	sub := in.sub
	sub.ID = herald.NewID(herald.PrefixSubscription)
	sub.State = herald.SubscriptionEnabled
	if in.state == herald.SubscriptionDisabled {
		sub.State, sub.DisabledReason = herald.SubscriptionDisabled, disabledByAPI
	}
	sub.CreatedAt, sub.UpdatedAt = now, now
	created, err := s.store.SubscriptionCreate(r.Context(), &store.SubscriptionCreateParams{
		Subscription: &sub, Secret: secret, Now: now,
	})
	if err != nil {
		return err
	}
	noStore(w)
	w.Header().Set("Location", "/v1/subscriptions/"+created.ID)
	return s.reply(w, http.StatusCreated, subscriptionView(created, secret))
}

type listJSON[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"next_cursor"`
}

func (s *server) subscriptionList(w http.ResponseWriter, r *http.Request) error {
	p, err := pageParams(r, herald.PrefixSubscription)
	if err != nil {
		return err
	}
	q, err := query(r)
	if err != nil {
		return err
	}
	tenant, err := tenantFilter(r, q)
	if err != nil {
		return err
	}
	res, err := s.store.SubscriptionList(r.Context(), &store.SubscriptionListParams{Limit: p.limit, After: p.key, Tenant: tenant})
	if err != nil {
		return err
	}
	out := listJSON[subscriptionJSON]{Data: make([]subscriptionJSON, len(res.Subscriptions))}
	for i, sub := range res.Subscriptions {
		out.Data[i] = subscriptionView(receiverAsSeenBy(r, sub), "")
	}
	if n := len(res.Subscriptions); n > 0 {
		out.NextCursor = nextCursor(res.More, res.Subscriptions[n-1].ID)
	}
	return s.reply(w, http.StatusOK, out)
}

func (s *server) subscriptionGet(w http.ResponseWriter, r *http.Request) error {
	sub, err := s.visibleSubscription(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	return s.reply(w, http.StatusOK, subscriptionView(receiverAsSeenBy(r, sub), ""))
}

// subscriptionPatch applies a JSON merge patch (RFC 7396) to the current
// subscription and validates the result as a whole, exactly like a create
// body: a patch cannot produce a subscription a create would refuse. One
// deviation from RFC 7396: "filter" is replaced, not merged, because it
// holds exactly one kind and merging {"jmespath": …} into a CEL filter
// could only fail.
//
// Two concurrent patches of one subscription are last-writer-wins.
func (s *server) subscriptionPatch(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	patch, err := parseBody(body)
	if err != nil {
		return err
	}
	for _, f := range readOnlySubscriptionFields {
		if patch.has(f) {
			msg := "%s cannot be changed"
			if f == "secret" {
				msg += "; rotate it with POST /v1/subscriptions/{id}/secret/rotate"
			}
			return herald.FieldErrorf(herald.CodeInvalidField, f, msg, f)
		}
	}
	if err := patch.allow(subscriptionFields...); err != nil {
		return err
	}
	cur, err := s.visibleSubscription(r, id)
	if err != nil {
		return err
	}
	merged, err := mergeSubscription(cur, body)
	if err != nil {
		return err
	}
	in, err := decodeSubscription(merged)
	if err != nil {
		return err
	}
	upd := in.sub
	upd.ID, upd.CreatedAt = cur.ID, cur.CreatedAt
	upd.Tenant, upd.AllTenants = cur.Tenant, cur.AllTenants
	upd.State, upd.DisabledReason = cur.State, cur.DisabledReason
	switch in.state {
	case herald.SubscriptionEnabled:
		upd.State, upd.DisabledReason = herald.SubscriptionEnabled, ""
	case herald.SubscriptionDisabled:
		// Keep the reason of an earlier disable (e.g. a 410 from the
		// endpoint): it says more than "disabled by API".
		if cur.State != herald.SubscriptionDisabled {
			upd.State, upd.DisabledReason = herald.SubscriptionDisabled, disabledByAPI
		}
	}
	now := s.now()
	upd.UpdatedAt = now
	res, err := s.store.SubscriptionUpdate(r.Context(), &store.SubscriptionUpdateParams{Subscription: &upd, Now: now})
	if err != nil {
		return notFound(err, "subscription", id)
	}
	return s.reply(w, http.StatusOK, subscriptionView(res, ""))
}

// mergeSubscription applies the merge patch body to cur and returns the
// merged document, ready for decodeSubscription.
func mergeSubscription(cur *herald.Subscription, body []byte) ([]byte, error) {
	curJSON, err := marshalVerbatim(subscriptionView(cur, ""))
	if err != nil {
		return nil, err
	}
	var doc, patch map[string]any
	if err := decodeNumbers(curJSON, &doc); err != nil {
		return nil, err
	}
	if err := decodeNumbers(body, &patch); err != nil {
		return nil, &herald.Error{Code: herald.CodeInvalidJSON, Message: "malformed JSON", Err: err}
	}
	for _, f := range readOnlySubscriptionFields {
		delete(doc, f)
	}
	for k, v := range patch {
		switch {
		case v == nil:
			delete(doc, k)
		case k == "filter":
			doc[k] = v
		default:
			doc[k] = mergePatch(doc[k], v)
		}
	}
	return marshalVerbatim(doc)
}

// marshalVerbatim is json.Marshal without HTML escaping: json.Marshal
// rewrites "&", "<" and ">" inside strings (and inside a RawMessage such as
// an es_query filter) as \u0026…, so a PATCH that does not touch the
// filter would still store it with different bytes than were given.
func marshalVerbatim(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decodeNumbers unmarshals keeping numbers as json.Number, so that a merge
// neither rounds large integers nor turns 5 into 5.0.
func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// mergePatch is RFC 7396 MergePatch(target, patch).
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	out := make(map[string]any, len(t)+len(p))
	for k, v := range t {
		out[k] = v
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergePatch(out[k], v)
	}
	return out
}

func (s *server) subscriptionDelete(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.confineSubscription(r, id); err != nil {
		return err
	}
	err := s.store.SubscriptionDelete(r.Context(), &store.SubscriptionDeleteParams{ID: id, Now: s.now()})
	if err != nil {
		return notFound(err, "subscription", id)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

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
