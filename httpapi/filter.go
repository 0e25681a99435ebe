package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/filter"
)

// Filters: POST /v1/filters/test tries event types and a filter on a sample
// event.

// filterTest answers POST /v1/filters/test: would a subscription with
// these event types and this filter receive this event? It compiles and
// evaluates exactly as fan-out does, cost budget included.
func (s *server) filterTest(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	o, err := parseBody(body)
	if err != nil {
		return err
	}
	if err := o.allow("filter", "event_types", "event"); err != nil {
		return err
	}
	var sub herald.Subscription
	if err := decodeEventTypes(o, &sub); err != nil {
		return err
	}
	if err := decodeFilter(o, &sub); err != nil {
		return err
	}
	raw, ok := o.get("event")
	if !ok {
		return herald.FieldErrorf(herald.CodeMissingField, "event", "event is required")
	}
	eo, err := parseObject(raw, "event")
	if err != nil {
		return err
	}
	if err := eo.allow("id", "type", "key", "version", "data", "timestamp", "tenant"); err != nil {
		return err
	}
	ev := &herald.Event{Data: json.RawMessage("null"), CreatedAt: s.now()}
	if set, err := eo.str("type", &ev.Type); err != nil {
		return err
	} else if !set || ev.Type == "" {
		return herald.FieldErrorf(herald.CodeMissingField, "event.type", "event.type is required")
	}
	if _, err := eo.str("id", &ev.ID); err != nil {
		return err
	}
	if _, err := eo.str("key", &ev.Key); err != nil {
		return err
	}
	// Filters see the tenant as event.tenant (CEL) or tenant (JMESPath).
	if _, err := eo.str("tenant", &ev.Tenant); err != nil {
		return err
	}
	var version int64
	if set, err := eo.integer("version", &version); err != nil {
		return err
	} else if set {
		ev.Version = &version
	}
	if d, ok := eo.get("data"); ok {
		ev.Data = d
	}
	typeMatched := herald.MatchEventType(sub.EventTypes, ev.Type) &&
		(!herald.IsSystemEventType(ev.Type) || sub.WantsSystemEvents())
	m, err := filter.Compile(sub.Filter)
	if err != nil {
		return &herald.Error{Code: herald.CodeInvalidFilter, Field: "filter", Message: err.Error(), Err: err}
	}
	filterMatched := m.Match(filter.NewInput(ev))
	return s.reply(w, http.StatusOK, struct {
		Matched       bool `json:"matched"`
		TypeMatched   bool `json:"type_matched"`
		FilterMatched bool `json:"filter_matched"`
	}{typeMatched && filterMatched, typeMatched, filterMatched})
}
