package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/filter"
	"github.com/heraldhq/herald/store"
)

// Sources (issue 23): the broker queues, streams and topics herald
// consumes events from. POST and GET /v1/sources, GET, PATCH and DELETE
// /v1/sources/{name}; admin scope and never a tenant-confined token, as
// for connections: a source reads from an operator-owned connection and
// may publish events of any tenant.

// sourceFields are the keys of a source body.
var sourceFields = []string{"name", "type", "connection", "queue", "stream", "durable", "subject", "group", "topic",
	"mapping", "tenant", "ordered", "enabled", "prefetch"}

// sourceBrokerFields are the fields that say where on the broker a
// source reads, by type (herald.CheckSource holds the same table).
var sourceBrokerFields = map[herald.DestinationType][]string{
	herald.DestinationAMQP:  {"queue"},
	herald.DestinationNATS:  {"stream", "durable", "subject"},
	herald.DestinationRedis: {"stream", "group"},
	herald.DestinationMQTT:  {"topic"},
}

// readOnlySourceFields appear in answers but cannot be patched.
var readOnlySourceFields = []string{"created_at", "updated_at", "status"}

// sourceJSON is a source as the API shows it: every broker field of its
// type (defaults included), none of the others; mapping null when it has
// none. Status is only in GET /v1/sources/{name}.
type sourceJSON struct {
	Name       string                 `json:"name"`
	Type       herald.DestinationType `json:"type"`
	Connection string                 `json:"connection"`
	Queue      *string                `json:"queue,omitempty"`
	Stream     *string                `json:"stream,omitempty"`
	Durable    *string                `json:"durable,omitempty"`
	Subject    *string                `json:"subject,omitempty"`
	Group      *string                `json:"group,omitempty"`
	Topic      *string                `json:"topic,omitempty"`
	Mapping    *herald.SourceMapping  `json:"mapping"`
	Tenant     string                 `json:"tenant,omitempty"`
	Ordered    bool                   `json:"ordered"`
	Enabled    bool                   `json:"enabled"`
	// Prefetch as stored: 0 means herald.DefaultSourcePrefetch.
	Prefetch  int               `json:"prefetch"`
	CreatedAt string            `json:"created_at"`
	UpdatedAt string            `json:"updated_at"`
	Status    *sourceStatusJSON `json:"status,omitempty"`
}

// sourceStatusJSON is herald.SourceStatus with the API's timestamps.
type sourceStatusJSON struct {
	State         string                 `json:"state"`
	Consumed      int64                  `json:"consumed"`
	Duplicates    int64                  `json:"duplicates"`
	Rejected      int64                  `json:"rejected"`
	LastError     string                 `json:"last_error,omitempty"`
	Pending       *int64                 `json:"pending,omitempty"`
	Nodes         []sourceNodeStatusJSON `json:"nodes"`
	RecentRejects []sourceRejectJSON     `json:"recent_rejects"`
}

type sourceNodeStatusJSON struct {
	Node       string `json:"node"`
	State      string `json:"state"`
	Consumed   int64  `json:"consumed"`
	Duplicates int64  `json:"duplicates"`
	Rejected   int64  `json:"rejected"`
	LastError  string `json:"last_error,omitempty"`
	Pending    *int64 `json:"pending,omitempty"`
	UpdatedAt  string `json:"updated_at"`
}

type sourceRejectJSON struct {
	At        string `json:"at"`
	Node      string `json:"node,omitempty"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
	MessageID string `json:"message_id,omitempty"`
	Excerpt   string `json:"excerpt,omitempty"`
}

func sourceView(src *herald.Source) sourceJSON {
	v := sourceJSON{Name: src.Name, Type: src.Type, Connection: src.Connection, Mapping: src.Mapping,
		Tenant: src.Tenant, Ordered: src.Ordered, Enabled: src.Enabled, Prefetch: src.Prefetch,
		CreatedAt: timestamp(src.CreatedAt), UpdatedAt: timestamp(src.UpdatedAt)}
	fields := map[string]**string{"queue": &v.Queue, "stream": &v.Stream, "durable": &v.Durable,
		"subject": &v.Subject, "group": &v.Group, "topic": &v.Topic}
	values := map[string]string{"queue": src.Queue, "stream": src.Stream, "durable": src.Durable,
		"subject": src.Subject, "group": src.Group, "topic": src.Topic}
	for _, f := range sourceBrokerFields[src.Type] {
		*fields[f] = new(values[f])
	}
	return v
}

func sourceStatusView(st *herald.SourceStatus) *sourceStatusJSON {
	v := &sourceStatusJSON{State: st.State, Consumed: st.Consumed, Duplicates: st.Duplicates, Rejected: st.Rejected,
		LastError: st.LastError, Pending: st.Pending,
		Nodes: make([]sourceNodeStatusJSON, len(st.Nodes)), RecentRejects: make([]sourceRejectJSON, len(st.RecentRejects))}
	for i, n := range st.Nodes {
		v.Nodes[i] = sourceNodeStatusJSON{Node: n.Node, State: n.State, Consumed: n.Consumed, Duplicates: n.Duplicates,
			Rejected: n.Rejected, LastError: n.LastError, Pending: n.Pending, UpdatedAt: timestamp(n.UpdatedAt)}
	}
	for i, r := range st.RecentRejects {
		v.RecentRejects[i] = sourceRejectJSON{At: timestamp(r.At), Node: r.Node, Reason: r.Reason, Message: r.Message,
			MessageID: r.MessageID, Excerpt: r.Excerpt}
	}
	return v
}

// decodeSourceSettings decodes every field of o but name and type into
// src, each only when present: on a PATCH a field given replaces the
// stored one, and null clears it (a string field to "", mapping to none,
// prefetch to the default); enabled null keeps the current value.
func decodeSourceSettings(o object, src *herald.Source) error {
	// In body order of the docs, so that of several bad fields the same
	// one is always named.
	for _, f := range []struct {
		name string
		dst  *string
	}{{"connection", &src.Connection}, {"queue", &src.Queue}, {"stream", &src.Stream}, {"durable", &src.Durable},
		{"subject", &src.Subject}, {"group", &src.Group}, {"topic", &src.Topic}, {"tenant", &src.Tenant}} {
		if !o.has(f.name) {
			continue
		}
		*f.dst = ""
		if _, err := o.str(f.name, f.dst); err != nil {
			return err
		}
	}
	if o.has("mapping") {
		m, err := decodeSourceMapping(o)
		if err != nil {
			return err
		}
		src.Mapping = m
	}
	if o.has("ordered") {
		v, err := o.boolean("ordered")
		if err != nil {
			return err
		}
		src.Ordered = v
	}
	if _, ok := o.get("enabled"); ok {
		v, err := o.boolean("enabled")
		if err != nil {
			return err
		}
		src.Enabled = v
	}
	if o.has("prefetch") {
		var n int64
		if _, err := o.integer("prefetch", &n); err != nil {
			return err
		}
		if n < 0 || n > herald.MaxSourcePrefetch {
			return invalid("prefetch", "must be 0 (default %d) to %d, got %d", herald.DefaultSourcePrefetch, herald.MaxSourcePrefetch, n)
		}
		src.Prefetch = int(n)
	}
	return nil
}

// decodeSourceMapping decodes the mapping object (null, or an object
// whose expressions are all blank: no mapping).
func decodeSourceMapping(o object) (*herald.SourceMapping, error) {
	raw, ok := o.get("mapping")
	if !ok {
		return nil, nil
	}
	mo, err := parseObject(raw, "mapping")
	if err != nil {
		return nil, err
	}
	if err := mo.allow(filter.MappingFields...); err != nil {
		return nil, err
	}
	m := &herald.SourceMapping{}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"id", &m.ID}, {"type", &m.Type}, {"key", &m.Key}, {"version", &m.Version}, {"tenant", &m.Tenant}, {"data", &m.Data}} {
		if _, err := mo.str(f.name, f.dst); err != nil {
			return nil, err
		}
		// Blank is no expression (CompileMapping trims too): store none.
		*f.dst = strings.TrimSpace(*f.dst)
	}
	if *m == (herald.SourceMapping{}) {
		return nil, nil
	}
	return m, nil
}

// checkSource validates a whole source (created, or merged by a PATCH)
// and fills its defaults: its shape (herald.CheckSource), its mapping's
// expressions, and its connection, which must exist, have the source's
// type and allow the source's tenant.
func (s *server) checkSource(ctx context.Context, src *herald.Source) error {
	switch src.Type {
	case herald.DestinationNATS:
		if src.Durable == "" {
			src.Durable = herald.DefaultSourceConsumer
		}
	case herald.DestinationRedis:
		if src.Group == "" {
			src.Group = herald.DefaultSourceConsumer
		}
	}
	if err := herald.CheckSource(src); err != nil {
		return err
	}
	if _, err := filter.CompileMapping(src.Mapping); err != nil {
		return err
	}
	c, err := s.store.ConnectionGet(ctx, src.Connection)
	if errors.Is(err, herald.ErrNotFound) {
		return herald.FieldErrorf(herald.CodeInvalidField, "connection",
			"no connection %s (create it with POST /v1/connections)", quote(src.Connection))
	}
	if err != nil {
		return err
	}
	if c.Type != src.Type {
		return invalid("connection", "%s is a %s connection; a %s source needs a %s connection",
			quote(src.Connection), c.Type, src.Type, src.Type)
	}
	if !c.Allows(src.Tenant) {
		return herald.FieldErrorf(herald.CodeInvalidField, "tenant",
			"connection %s is not granted to tenant %s: add the tenant to the connection's tenants first", quote(src.Connection), quote(src.Tenant))
	}
	return nil
}

func (s *server) sourceCreate(w http.ResponseWriter, r *http.Request) error {
	if err := confineAdmin(r, "sources"); err != nil {
		return err
	}
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	o, err := parseBody(body)
	if err != nil {
		return err
	}
	if err := o.allow(sourceFields...); err != nil {
		return err
	}
	src := &herald.Source{Enabled: true}
	if set, err := o.str("name", &src.Name); err != nil {
		return err
	} else if !set {
		return herald.FieldErrorf(herald.CodeMissingField, "name", "name is required")
	}
	var typ string
	if set, err := o.str("type", &typ); err != nil {
		return err
	} else if !set {
		return herald.FieldErrorf(herald.CodeMissingField, "type", "type is required: amqp, nats, redis or mqtt")
	}
	src.Type = herald.DestinationType(typ)
	if err := decodeSourceSettings(o, src); err != nil {
		return err
	}
	if err := s.checkSource(r.Context(), src); err != nil {
		return err
	}
	now := s.now()
	src.CreatedAt, src.UpdatedAt = now, now
	out, err := s.store.SourceCreate(r.Context(), &store.SourceCreateParams{Source: src})
	if err != nil {
		return err
	}
	s.sourcesChanged()
	w.Header().Set("Location", "/v1/sources/"+url.PathEscape(out.Name))
	return s.reply(w, http.StatusCreated, sourceView(out))
}

func (s *server) sourceList(w http.ResponseWriter, r *http.Request) error {
	if err := confineAdmin(r, "sources"); err != nil {
		return err
	}
	limit, after, err := namePage(r)
	if err != nil {
		return err
	}
	res, err := s.store.SourceList(r.Context(), &store.SourceListParams{Limit: limit, After: after})
	if err != nil {
		return err
	}
	out := listJSON[sourceJSON]{Data: make([]sourceJSON, len(res.Sources))}
	for i, src := range res.Sources {
		out.Data[i] = sourceView(src)
	}
	if n := len(res.Sources); n > 0 {
		out.NextCursor = nextCursor(res.More, res.Sources[n-1].Name)
	}
	return s.reply(w, http.StatusOK, out)
}

// sourceGet answers the source with its status over every node.
func (s *server) sourceGet(w http.ResponseWriter, r *http.Request) error {
	if err := confineAdmin(r, "sources"); err != nil {
		return err
	}
	name := r.PathValue("name")
	src, err := s.store.SourceGet(r.Context(), name)
	if err != nil {
		return notFound(err, "source", name)
	}
	st, err := s.store.SourceStatusGet(r.Context(), &store.SourceStatusGetParams{Name: name, Now: s.now()})
	if err != nil {
		// Deleted between the two reads: as if it had been before.
		return notFound(err, "source", name)
	}
	v := sourceView(src)
	v.Status = sourceStatusView(st)
	return s.reply(w, http.StatusOK, v)
}

// sourcePatch merges the fields the body names into the stored source
// (mapping replaced whole; null clears a field) and checks the result as
// a create would. name and type cannot change; sending their current
// values back is accepted, so an answer can be edited and sent back.
func (s *server) sourcePatch(w http.ResponseWriter, r *http.Request) error {
	if err := confineAdmin(r, "sources"); err != nil {
		return err
	}
	name := r.PathValue("name")
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	o, err := parseBody(body)
	if err != nil {
		return err
	}
	for _, f := range readOnlySourceFields {
		if o.has(f) {
			return herald.FieldErrorf(herald.CodeInvalidField, f, "%s cannot be changed", f)
		}
	}
	if err := o.allow(sourceFields...); err != nil {
		return err
	}
	cur, err := s.store.SourceGet(r.Context(), name)
	if err != nil {
		return notFound(err, "source", name)
	}
	for _, f := range []string{"name", "type"} {
		v := map[string]string{"name": cur.Name, "type": string(cur.Type)}[f]
		var got string
		if _, err := o.str(f, &got); err != nil {
			return err
		}
		if o.has(f) && got != v {
			return herald.FieldErrorf(herald.CodeInvalidField, f,
				"%s cannot be changed (it is %s); create another source and delete this one", f, quote(v))
		}
	}
	src := *cur
	if src.Mapping != nil {
		m := *src.Mapping
		src.Mapping = &m
	}
	// A broker field of the type left empty takes its default again.
	if err := decodeSourceSettings(o, &src); err != nil {
		return err
	}
	if err := s.checkSource(r.Context(), &src); err != nil {
		return err
	}
	src.UpdatedAt = s.now()
	out, err := s.store.SourceUpdate(r.Context(), &store.SourceUpdateParams{Source: &src})
	if err != nil {
		return notFound(err, "source", name)
	}
	s.sourcesChanged()
	return s.reply(w, http.StatusOK, sourceView(out))
}

func (s *server) sourceDelete(w http.ResponseWriter, r *http.Request) error {
	if err := confineAdmin(r, "sources"); err != nil {
		return err
	}
	name := r.PathValue("name")
	if err := s.store.SourceDelete(r.Context(), name); err != nil {
		return notFound(err, "source", name)
	}
	s.sourcesChanged()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// sourcesChanged tells this node's source manager (Config.SourcesChanged).
func (s *server) sourcesChanged() {
	if s.cfg.SourcesChanged != nil {
		s.cfg.SourcesChanged()
	}
}
