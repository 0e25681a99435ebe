package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Connections (issue 22): the operator-owned broker connections a broker
// destination names. POST and GET /v1/connections, GET, PATCH and DELETE
// /v1/connections/{name}; admin scope, and never a tenant-confined token:
// brokers live on private networks a tenant must not point herald at, and
// their URLs carry passwords. No answer ever holds the password: the URL
// is shown with it replaced by "***".

// connectionFields are the keys of a connection body.
var connectionFields = []string{"name", "type", "url", "tls", "tenants"}

// readOnlyConnectionFields appear in answers but cannot be patched: a
// subscription names a connection and was checked against its type.
var readOnlyConnectionFields = []string{"name", "type", "created_at", "updated_at"}

// connectionJSON is a connection as the API shows it.
type connectionJSON struct {
	Name string                 `json:"name"`
	Type herald.DestinationType `json:"type"`
	// URL has its password (and a NATS token) replaced by "***"; "" when
	// the configured keys cannot open the stored value.
	URL string                `json:"url"`
	TLS *herald.ConnectionTLS `json:"tls"`
	// Tenants is the list of tenants granted, or "all".
	Tenants   any    `json:"tenants"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

func connectionView(c *herald.Connection) connectionJSON {
	v := connectionJSON{Name: c.Name, Type: c.Type, URL: redactConnectionURL(c.Type, c.URL), TLS: c.TLS,
		Tenants: c.Tenants, CreatedAt: timestamp(c.CreatedAt), UpdatedAt: timestamp(c.UpdatedAt)}
	if c.AllTenants {
		v.Tenants = "all"
	} else if c.Tenants == nil {
		v.Tenants = []string{}
	}
	return v
}

// redactConnectionURL replaces the password of raw's userinfo by "***"
// (a NATS URL's lone user is a token: it is replaced whole), and the
// values of query parameters whose names suggest a credential. A URL that
// does not parse is "***" whole.
func redactConnectionURL(t herald.DestinationType, raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return maskedCredential
	}
	userinfo := ""
	if u.User != nil {
		user := u.User.Username()
		_, hasPassword := u.User.Password()
		switch {
		case hasPassword:
			userinfo = url.User(user).String() + ":" + maskedCredential + "@"
		case t == herald.DestinationNATS:
			userinfo = maskedCredential + "@"
		default:
			userinfo = url.User(user).String() + "@"
		}
		u.User = nil
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			if name, value, ok := strings.Cut(p, "="); ok && value != "" && credentialHeader(name) {
				parts[i] = name + "=" + maskedCredential
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	out := u.String()
	if userinfo != "" {
		// Set by hand: url.UserPassword would escape the stars.
		out = strings.Replace(out, "://", "://"+userinfo, 1)
	}
	return out
}

// keepMaskedPassword lets a client send back the URL an answer showed: a
// password (or NATS token) of "***" in next means "keep the current one".
func keepMaskedPassword(next, cur string) string {
	nu, err := url.Parse(next)
	if err != nil || nu.User == nil {
		return next
	}
	pw, hasPassword := nu.User.Password()
	if !(hasPassword && pw == maskedCredential) && !(!hasPassword && nu.User.Username() == maskedCredential) {
		return next
	}
	cu, err := url.Parse(cur)
	if err != nil || cu.User == nil {
		return next
	}
	if hasPassword {
		if cpw, ok := cu.User.Password(); ok {
			nu.User = url.UserPassword(nu.User.Username(), cpw)
		}
	} else {
		nu.User = cu.User
	}
	return nu.String()
}

// confineAdmin refuses a tenant-confined token (admin scope is checked by
// the route): connections and sources (what) span every tenant.
func confineAdmin(r *http.Request, what string) error {
	if own := principalOf(r).Tenant; own != "" {
		return herald.Errorf(herald.CodeForbidden,
			"%s are operator-owned: a token confined to tenant %s cannot read or change them", what, quote(own))
	}
	return nil
}

// decodeConnectionSettings decodes url, tls and tenants into c (each only
// when present). cur is the stored connection on a PATCH, nil on create.
func decodeConnectionSettings(o object, c *herald.Connection, cur *herald.Connection) error {
	var u string
	set, err := o.str("url", &u)
	if err != nil {
		return err
	}
	if set {
		if cur != nil {
			u = keepMaskedPassword(u, cur.URL)
		}
		if err := herald.CheckConnectionURL(c.Type, u); err != nil {
			return invalid("url", "%s", err)
		}
		c.URL = u
	} else if o.has("url") {
		return herald.FieldErrorf(herald.CodeMissingField, "url", "url is required")
	}
	if o.has("tls") {
		tls, err := decodeConnectionTLS(o)
		if err != nil {
			return err
		}
		c.TLS = tls
	}
	if raw, ok := o.fields["tenants"]; ok {
		c.Tenants, c.AllTenants = []string{}, false
		switch {
		case isNull(raw):
		case string(raw) == `"all"`:
			c.AllTenants = true
		default:
			list, _, err := o.stringList("tenants")
			if err != nil {
				return typeError("tenants", `an array of tenant ids or "all"`, raw)
			}
			for i, t := range list {
				if !herald.ValidTenant(t) {
					return invalid("tenants", "[%d] must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-'", i, herald.MaxTenantLen)
				}
				if !slices.Contains(c.Tenants, t) {
					c.Tenants = append(c.Tenants, t)
				}
			}
			slices.Sort(c.Tenants)
		}
	}
	return nil
}

func decodeConnectionTLS(o object) (*herald.ConnectionTLS, error) {
	raw, ok := o.get("tls")
	if !ok {
		return nil, nil
	}
	to, err := parseObject(raw, "tls")
	if err != nil {
		return nil, err
	}
	if err := to.allow("ca_file", "cert_file", "key_file", "server_name", "insecure_skip_verify"); err != nil {
		return nil, err
	}
	tls := &herald.ConnectionTLS{}
	for name, dst := range map[string]*string{"ca_file": &tls.CAFile, "cert_file": &tls.CertFile,
		"key_file": &tls.KeyFile, "server_name": &tls.ServerName} {
		if _, err := to.str(name, dst); err != nil {
			return nil, err
		}
	}
	if tls.InsecureSkipVerify, err = to.boolean("insecure_skip_verify"); err != nil {
		return nil, err
	}
	if (tls.CertFile == "") != (tls.KeyFile == "") {
		return nil, invalid("tls.cert_file", "and tls.key_file go together (a client certificate and its key)")
	}
	if *tls == (herald.ConnectionTLS{}) {
		return nil, nil
	}
	return tls, nil
}

func (s *server) connectionCreate(w http.ResponseWriter, r *http.Request) error {
	if err := confineAdmin(r, "connections"); err != nil {
		return err
	}
	body, err := readBody(w, r, s.smallLimit(SmallBodyBytes))
	if err != nil {
		return err
	}
	o, err := parseBody(body)
	if err != nil {
		return err
	}
	if err := o.allow(connectionFields...); err != nil {
		return err
	}
	c := &herald.Connection{Tenants: []string{}}
	set, err := o.str("name", &c.Name)
	if err != nil {
		return err
	}
	if !set {
		return herald.FieldErrorf(herald.CodeMissingField, "name", "name is required")
	}
	if !herald.ValidConnectionName(c.Name) {
		return invalid("name", "must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit",
			herald.MaxConnectionNameLen)
	}
	var typ string
	if set, err = o.str("type", &typ); err != nil {
		return err
	}
	if !set {
		return herald.FieldErrorf(herald.CodeMissingField, "type", "type is required")
	}
	c.Type = herald.DestinationType(typ)
	if !c.Type.UsesConnection() {
		return invalid("type", "must be one of amqp, nats, redis or mqtt, got %s", quote(typ))
	}
	if _, ok := o.get("url"); !ok {
		return herald.FieldErrorf(herald.CodeMissingField, "url", "url is required")
	}
	if err := decodeConnectionSettings(o, c, nil); err != nil {
		return err
	}
	now := s.now()
	c.CreatedAt, c.UpdatedAt = now, now
	out, err := s.store.ConnectionCreate(r.Context(), &store.ConnectionCreateParams{Connection: c})
	if err != nil {
		return err
	}
	noStore(w)
	w.Header().Set("Location", "/v1/connections/"+url.PathEscape(out.Name))
	return s.reply(w, http.StatusCreated, connectionView(out))
}

func (s *server) connectionList(w http.ResponseWriter, r *http.Request) error {
	if err := confineAdmin(r, "connections"); err != nil {
		return err
	}
	limit, after, err := namePage(r)
	if err != nil {
		return err
	}
	res, err := s.store.ConnectionList(r.Context(), &store.ConnectionListParams{Limit: limit, After: after})
	if err != nil {
		return err
	}
	out := listJSON[connectionJSON]{Data: make([]connectionJSON, len(res.Connections))}
	for i, c := range res.Connections {
		out.Data[i] = connectionView(c)
	}
	if n := len(res.Connections); n > 0 {
		out.NextCursor = nextCursor(res.More, res.Connections[n-1].Name)
	}
	noStore(w)
	return s.reply(w, http.StatusOK, out)
}

func (s *server) connectionGet(w http.ResponseWriter, r *http.Request) error {
	if err := confineAdmin(r, "connections"); err != nil {
		return err
	}
	name := r.PathValue("name")
	c, err := s.store.ConnectionGet(r.Context(), name)
	if err != nil {
		return notFound(err, "connection", name)
	}
	noStore(w)
	return s.reply(w, http.StatusOK, connectionView(c))
}

// connectionPatch replaces the fields the body names (url, tls, tenants;
// null tls removes it, null tenants grants none). A url whose password is
// "***" keeps the stored password, so an answer can be sent back as it is.
func (s *server) connectionPatch(w http.ResponseWriter, r *http.Request) error {
	if err := confineAdmin(r, "connections"); err != nil {
		return err
	}
	name := r.PathValue("name")
	body, err := readBody(w, r, s.smallLimit(SmallBodyBytes))
	if err != nil {
		return err
	}
	o, err := parseBody(body)
	if err != nil {
		return err
	}
	for _, f := range readOnlyConnectionFields {
		if o.has(f) {
			msg := "%s cannot be changed"
			if f == "name" || f == "type" {
				msg += "; create another connection and move the subscriptions to it"
			}
			return herald.FieldErrorf(herald.CodeInvalidField, f, msg, f)
		}
	}
	if err := o.allow(connectionFields...); err != nil {
		return err
	}
	cur, err := s.store.ConnectionGet(r.Context(), name)
	if err != nil {
		return notFound(err, "connection", name)
	}
	c := *cur
	if err := decodeConnectionSettings(o, &c, cur); err != nil {
		return err
	}
	c.UpdatedAt = s.now()
	out, err := s.store.ConnectionUpdate(r.Context(), &store.ConnectionUpdateParams{Connection: &c})
	if err != nil {
		return notFound(err, "connection", name)
	}
	noStore(w)
	return s.reply(w, http.StatusOK, connectionView(out))
}

// connectionDelete answers 409 while a subscription uses the connection,
// naming one.
func (s *server) connectionDelete(w http.ResponseWriter, r *http.Request) error {
	if err := confineAdmin(r, "connections"); err != nil {
		return err
	}
	name := r.PathValue("name")
	if err := s.store.ConnectionDelete(r.Context(), &store.ConnectionDeleteParams{Name: name}); err != nil {
		return notFound(err, "connection", name)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// namePage reads the limit and cursor of a list paged by name
// (connections, sources): the cursor is the last name of the previous
// page.
func namePage(r *http.Request) (limit int, after string, err error) {
	q, err := query(r)
	if err != nil {
		return 0, "", err
	}
	if limit, err = limitParam(q); err != nil {
		return 0, "", err
	}
	if c := q.Get("cursor"); c != "" {
		var ok bool
		if after, ok = decodeCursor(c, ""); !ok {
			return 0, "", herald.FieldErrorf(herald.CodeInvalidCursor, "cursor",
				"cursor is not one this API returned; pass next_cursor from the previous page unchanged")
		}
	}
	return limit, after, nil
}
