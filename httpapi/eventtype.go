package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/eventtype"
	"github.com/heraldhq/herald/store"
)

// Event type catalog (issue 24 item 16): POST and GET /v1/event-types,
// GET, PATCH and DELETE /v1/event-types/{name}. Writes take admin scope
// and an unconfined token (the catalog is shared by every tenant); reads
// take any token, tenant and read-only tokens and portal sessions
// included, because subscription forms and the portal offer the
// catalog's types.

// Catalog checks published events against the catalog's schemas
// (*eventtype.Catalog).
type Catalog interface {
	// Validate refuses ev (CodeSchemaMismatch naming the value at fault
	// under path) when its type validates and its data does not conform.
	Validate(ctx context.Context, ev *herald.Event, path string) error
	// Invalidate makes the next Validate reread the catalog: called after
	// a write through this API.
	Invalidate()
}

// eventTypeFields are the keys of an event type body.
var eventTypeFields = []string{"name", "description", "schema", "example", "deprecated", "validate"}

// readOnlyEventTypeFields appear in answers but cannot be patched.
var readOnlyEventTypeFields = []string{"name", "created_at", "updated_at"}

// eventTypeJSON is an event type as the API shows it: schema and example
// null when none.
type eventTypeJSON struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Example     json.RawMessage `json:"example"`
	Deprecated  bool            `json:"deprecated"`
	Validate    bool            `json:"validate"`
	CreatedAt   string          `json:"created_at"`
	UpdatedAt   string          `json:"updated_at"`
}

func eventTypeView(et *herald.EventType) eventTypeJSON {
	v := eventTypeJSON{Name: et.Name, Description: et.Description, Schema: et.Schema, Example: et.Example,
		Deprecated: et.Deprecated, Validate: et.Validate,
		CreatedAt: timestamp(et.CreatedAt), UpdatedAt: timestamp(et.UpdatedAt)}
	if len(v.Schema) == 0 {
		v.Schema = json.RawMessage("null")
	}
	if len(v.Example) == 0 {
		v.Example = json.RawMessage("null")
	}
	return v
}

// decodeEventTypeSettings decodes the mutable fields the body names into
// et, then checks the result whole: shape (herald.CheckEventType), the
// schema compiles (invalid_schema) and the example conforms
// (schema_mismatch naming example.<path>).
func decodeEventTypeSettings(o object, et *herald.EventType) error {
	if _, err := o.str("description", &et.Description); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		dst  *json.RawMessage
	}{{"schema", &et.Schema}, {"example", &et.Example}} {
		name, dst := f.name, f.dst
		raw, ok := o.fields[name]
		if !ok {
			continue
		}
		if isNull(raw) {
			*dst = nil
			continue
		}
		c, err := compactJSON(raw)
		if err != nil {
			return invalid(name, "is not valid JSON")
		}
		*dst = c
	}
	var err error
	if o.has("deprecated") {
		if et.Deprecated, err = o.boolean("deprecated"); err != nil {
			return err
		}
	}
	if o.has("validate") {
		if et.Validate, err = o.boolean("validate"); err != nil {
			return err
		}
	}
	if err := herald.CheckEventType(et); err != nil {
		return err
	}
	_, err = eventtype.Check(et)
	return err
}

func (s *server) eventTypesChanged() {
	if s.catalog != nil {
		s.catalog.Invalidate()
	}
}

func (s *server) eventTypeCreate(w http.ResponseWriter, r *http.Request) error {
	if err := confineAdmin(r, "event types"); err != nil {
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
	if err := o.allow(eventTypeFields...); err != nil {
		return err
	}
	et := &herald.EventType{}
	set, err := o.str("name", &et.Name)
	if err != nil {
		return err
	}
	if !set {
		return herald.FieldErrorf(herald.CodeMissingField, "name", "name is required")
	}
	if err := decodeEventTypeSettings(o, et); err != nil {
		return err
	}
	now := s.now()
	et.CreatedAt, et.UpdatedAt = now, now
	out, err := s.store.EventTypeCreate(r.Context(), &store.EventTypeCreateParams{EventType: et})
	if err != nil {
		return err
	}
	s.eventTypesChanged()
	w.Header().Set("Location", "/v1/event-types/"+url.PathEscape(out.Name))
	return s.reply(w, http.StatusCreated, eventTypeView(out))
}

// eventTypeList pages through the catalog by name; deprecated types only
// with include_deprecated=true (forms offer the current ones).
func (s *server) eventTypeList(w http.ResponseWriter, r *http.Request) error {
	limit, after, err := namePage(r)
	if err != nil {
		return err
	}
	q, err := query(r)
	if err != nil {
		return err
	}
	params := &store.EventTypeListParams{Limit: limit, After: after}
	switch v := q.Get("include_deprecated"); v {
	case "", "false":
	case "true":
		params.IncludeDeprecated = true
	default:
		return herald.FieldErrorf(herald.CodeInvalidField, "include_deprecated",
			"include_deprecated must be true or false, not %s", quote(v))
	}
	res, err := s.store.EventTypeList(r.Context(), params)
	if err != nil {
		return err
	}
	out := listJSON[eventTypeJSON]{Data: make([]eventTypeJSON, len(res.EventTypes))}
	for i, et := range res.EventTypes {
		out.Data[i] = eventTypeView(et)
	}
	if n := len(res.EventTypes); n > 0 {
		out.NextCursor = nextCursor(res.More, res.EventTypes[n-1].Name)
	}
	return s.reply(w, http.StatusOK, out)
}

func (s *server) eventTypeGet(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	et, err := s.store.EventTypeGet(r.Context(), name)
	if err != nil {
		return notFound(err, "event type", name)
	}
	return s.reply(w, http.StatusOK, eventTypeView(et))
}

// eventTypePatch replaces the fields the body names (null schema or
// example removes it) and checks the result whole, so a new schema must
// accept the stored example and a new example the stored schema.
func (s *server) eventTypePatch(w http.ResponseWriter, r *http.Request) error {
	if err := confineAdmin(r, "event types"); err != nil {
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
	for _, f := range readOnlyEventTypeFields {
		if o.has(f) {
			msg := "%s cannot be changed"
			if f == "name" {
				msg += "; create another event type and deprecate this one"
			}
			return herald.FieldErrorf(herald.CodeInvalidField, f, msg, f)
		}
	}
	if err := o.allow(eventTypeFields...); err != nil {
		return err
	}
	cur, err := s.store.EventTypeGet(r.Context(), name)
	if err != nil {
		return notFound(err, "event type", name)
	}
	et := *cur
	if err := decodeEventTypeSettings(o, &et); err != nil {
		return err
	}
	et.UpdatedAt = s.now()
	out, err := s.store.EventTypeUpdate(r.Context(), &store.EventTypeUpdateParams{EventType: &et})
	if err != nil {
		return notFound(err, "event type", name)
	}
	s.eventTypesChanged()
	return s.reply(w, http.StatusOK, eventTypeView(out))
}

func (s *server) eventTypeDelete(w http.ResponseWriter, r *http.Request) error {
	if err := confineAdmin(r, "event types"); err != nil {
		return err
	}
	name := r.PathValue("name")
	if err := s.store.EventTypeDelete(r.Context(), name); err != nil {
		return notFound(err, "event type", name)
	}
	s.eventTypesChanged()
	w.WriteHeader(http.StatusNoContent)
	return nil
}
