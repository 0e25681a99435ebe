package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Events: the event body decoder, POST /v1/events and /v1/events/batch,
// GET /v1/events (search) and GET /v1/events/{id}.

// Event limits.
const (
	maxEventType = 256 // characters
	maxEventID   = 256 // characters
	maxEventKey  = 256 // characters
)

var eventFields = []string{"id", "type", "key", "version", "data", "tenant"}

// decodeEvent decodes and validates one event body. Every error is a
// *herald.Error naming the JSON path at fault.
func decodeEvent(body []byte) (*herald.Event, error) {
	o, err := parseBody(body)
	if err != nil {
		return nil, err
	}
	return eventFromObject(o)
}

func eventFromObject(o object) (*herald.Event, error) {
	if err := o.allow(eventFields...); err != nil {
		return nil, err
	}
	ev := &herald.Event{Data: json.RawMessage("null")}

	set, err := o.str("type", &ev.Type)
	if err != nil {
		return nil, err
	}
	if !set || ev.Type == "" {
		return nil, herald.FieldErrorf(herald.CodeMissingField, o.at("type"), "%s is required", o.at("type"))
	}
	if n := utf8.RuneCountInString(ev.Type); n > maxEventType {
		return nil, invalid(o.at("type"), "must be at most %d characters, got %d", maxEventType, n)
	}
	if strings.IndexFunc(ev.Type, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return nil, invalid(o.at("type"), "must not contain whitespace or control characters")
	}
	if strings.HasPrefix(ev.Type, "herald.") {
		return nil, invalid(o.at("type"), "is reserved: herald.* event types are herald's own")
	}

	set, err = o.str("id", &ev.ID)
	if err != nil {
		return nil, err
	}
	if set {
		n := utf8.RuneCountInString(ev.ID)
		if n < 1 || n > maxEventID {
			return nil, invalid(o.at("id"), "must be 1 to %d characters, got %d", maxEventID, n)
		}
		if strings.IndexFunc(ev.ID, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			return nil, invalid(o.at("id"), "must hold printable characters only")
		}
	}

	if _, err := o.str("key", &ev.Key); err != nil {
		return nil, err
	}
	if n := utf8.RuneCountInString(ev.Key); n > maxEventKey {
		return nil, invalid(o.at("key"), "must be at most %d characters, got %d", maxEventKey, n)
	}
	if strings.IndexFunc(ev.Key, unicode.IsControl) >= 0 {
		return nil, invalid(o.at("key"), "must not contain control characters")
	}

	set, err = o.str("tenant", &ev.Tenant)
	if err != nil {
		return nil, err
	}
	if set && !herald.ValidTenant(ev.Tenant) {
		return nil, invalid(o.at("tenant"), "must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-'", herald.MaxTenantLen)
	}

	var version int64
	set, err = o.integer("version", &version)
	if err != nil {
		return nil, err
	}
	if set {
		ev.Version = &version
	}

	if raw, ok := o.get("data"); ok {
		data, err := compactJSON(raw)
		if err != nil {
			return nil, invalid(o.at("data"), "is not valid JSON")
		}
		ev.Data = data
	}
	return ev, nil
}

type publishJSON struct {
	ID         string `json:"id"`
	Duplicate  bool   `json:"duplicate"`
	Deliveries int    `json:"deliveries"`
}

// eventPublish answers 202 only after the event and its deliveries
// committed (PublishOne waits for its group commit).
func (s *server) eventPublish(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	ev, err := decodeEvent(body)
	if err != nil {
		return err
	}
	if err := stampTenant(r, ev); err != nil {
		return err
	}
	if err := s.catalog.Validate(r.Context(), ev, "data"); err != nil {
		return err
	}
	res, err := s.pub.PublishOne(r.Context(), ev)
	if err != nil {
		return err
	}
	return s.reply(w, http.StatusAccepted, publishJSON{ID: res.ID, Duplicate: res.Duplicate, Deliveries: res.DeliveryCount})
}

// Batch item statuses.
const (
	batchAccepted  = "accepted"
	batchDuplicate = "duplicate"
	batchRejected  = "rejected"
)

type batchResultJSON struct {
	Index      int        `json:"index"`
	ID         string     `json:"id,omitempty"`
	Status     string     `json:"status"`
	Deliveries *int       `json:"deliveries,omitempty"`
	Error      *errorJSON `json:"error,omitempty"`
}

type batchJSON struct {
	Results []batchResultJSON `json:"results"`
}

// decodeBatch decodes {"events": [...]}. The body as a whole must be
// well-formed; each item is then validated alone, so one bad item is
// rejected by itself. It returns the valid events with their indexes and a
// result slot for every item, rejected ones already filled in.
func decodeBatch(body []byte) (events []*herald.Event, index []int, results []batchResultJSON, err error) {
	o, err := parseJSONBody(body) // items are checked one by one
	if err != nil {
		return nil, nil, nil, err
	}
	if err := o.allow("events"); err != nil {
		return nil, nil, nil, err
	}
	raw, ok := o.get("events")
	if !ok {
		return nil, nil, nil, herald.FieldErrorf(herald.CodeMissingField, "events", "events is required")
	}
	items, ok := splitArray(raw) // raw is valid JSON: parseJSONBody checked the body
	if raw[0] != '[' || !ok {
		return nil, nil, nil, typeError("events", "an array", raw)
	}
	if len(items) > MaxBatchEvents {
		return nil, nil, nil, invalid("events", "may hold at most %d events, got %d", MaxBatchEvents, len(items))
	}
	results = make([]batchResultJSON, len(items))
	for i, item := range items {
		results[i].Index = i
		ev, err := batchItem(item, i)
		if err != nil {
			body, _ := errorOf(err)
			results[i].Status, results[i].Error = batchRejected, &body
			results[i].ID = itemID(item)
			continue
		}
		events = append(events, ev)
		index = append(index, i)
	}
	return events, index, results, nil
}

func batchItem(raw json.RawMessage, i int) (*herald.Event, error) {
	o, err := parseObject(raw, fmt.Sprintf("events[%d]", i))
	if err != nil {
		return nil, err
	}
	return eventFromObject(o)
}

// itemID is the id a rejected item gave, if it gave a string one, so a
// client can match results by id as well as by index.
func itemID(raw json.RawMessage) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return ""
	}
	var id string
	if json.Unmarshal(fields["id"], &id) != nil || len(id) > 4*maxEventID {
		return ""
	}
	return id
}

// eventPublishBatch stores every valid item in ONE transaction (all or
// nothing: a store failure fails the call and stores none) and answers 200
// with one result per item, in input order.
func (s *server) eventPublishBatch(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r, s.cfg.MaxBatchBodyBytes)
	if err != nil {
		return err
	}
	events, index, results, err := decodeBatch(body)
	if err != nil {
		return err
	}
	// An item naming another tenant than the token's, or whose data does
	// not conform to its type's schema, is rejected alone, like any
	// invalid item.
	kept, keptIndex := events[:0], index[:0]
	for n, ev := range events {
		err := stampTenant(r, ev)
		if err == nil {
			err = s.catalog.Validate(r.Context(), ev, fmt.Sprintf("events[%d].data", index[n]))
			if err != nil && herald.ErrorCode(err) != herald.CodeSchemaMismatch {
				return err // the catalog could not be read: nothing about the item
			}
		}
		if err != nil {
			body, _ := errorOf(err)
			results[index[n]].Status, results[index[n]].Error, results[index[n]].ID = batchRejected, &body, ev.ID
			continue
		}
		kept, keptIndex = append(kept, ev), append(keptIndex, index[n])
	}
	events, index = kept, keptIndex
	if len(events) > 0 {
		res, err := s.pub.PublishMany(r.Context(), events)
		if err != nil {
			return err
		}
		if len(res) != len(events) {
			return fmt.Errorf("publisher answered %d results for %d events", len(res), len(events))
		}
		for n, rr := range res {
			out := &results[index[n]]
			out.ID, out.Status = rr.ID, batchAccepted
			if rr.Duplicate {
				out.Status = batchDuplicate
			}
			count := rr.DeliveryCount
			out.Deliveries = &count
		}
	} else if err := s.confirmToken(r, nil); err != nil {
		return err // nothing to store confirmed the token, and it is gone
	}
	return s.reply(w, http.StatusOK, batchJSON{Results: results})
}

type eventDeliveryJSON struct {
	ID             string               `json:"id"`
	SubscriptionID string               `json:"subscription_id"`
	State          herald.DeliveryState `json:"state"`
	Tier           int                  `json:"tier"`
	AttemptCount   int                  `json:"attempt_count"`
}

type eventJSON struct {
	ID         string              `json:"id"`
	Type       string              `json:"type"`
	Key        string              `json:"key,omitempty"`
	Version    *int64              `json:"version,omitempty"`
	Tenant     string              `json:"tenant,omitempty"`
	Data       json.RawMessage     `json:"data"`
	Timestamp  string              `json:"timestamp"`
	Deliveries []eventDeliveryJSON `json:"deliveries"`
}

// eventGet reads an event by its key, (tenant, id): an id is unique only
// within its tenant (store.EventKey). A tenant-confined caller reads its
// own tenant's event. An unconfined one names the tenant with ?tenant=
// (empty: the untenanted space); without it the id is looked up in every
// tenant, and an id several tenants hold answers 409 conflict naming them
// (the caller sees every tenant anyway), never an arbitrary one of them.
func (s *server) eventGet(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	q := r.URL.Query()
	// tenantFilter validates ?tenant= and forces a confined caller's own
	// tenant, so the event found is always visible to the caller.
	t, err := tenantFilter(r, q)
	if err != nil {
		return err
	}
	params := &store.EventGetParams{ID: id, Tenant: t,
		AnyTenant: principalOf(r).Tenant == "" && !q.Has("tenant")}
	res, err := s.store.EventGet(r.Context(), params)
	if err != nil {
		return notFound(err, "event", id)
	}
	if own := principalOf(r).Tenant; own != "" {
		// Only deliveries to the tenant's own subscriptions: those of an
		// all-tenants subscription (an operator's audit sink) are not the
		// tenant's business.
		mine := res.Deliveries[:0:0]
		tenants := map[string]bool{}
		for _, d := range res.Deliveries {
			ok, seen := tenants[d.SubscriptionID]
			if !seen {
				sub, err := s.store.SubscriptionGet(r.Context(), d.SubscriptionID)
				ok = err == nil && sub.Tenant == own
				tenants[d.SubscriptionID] = ok
			}
			if ok {
				mine = append(mine, d)
			}
		}
		res.Deliveries = mine
	}
	ev := res.Event
	data := ev.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	out := eventJSON{
		ID: ev.ID, Type: ev.Type, Key: ev.Key, Version: ev.Version, Tenant: ev.Tenant, Data: data,
		Timestamp:  timestamp(ev.CreatedAt),
		Deliveries: make([]eventDeliveryJSON, len(res.Deliveries)),
	}
	for i, d := range res.Deliveries {
		out.Deliveries[i] = eventDeliveryJSON{
			ID: d.ID, SubscriptionID: d.SubscriptionID, State: d.State, Tier: d.Tier, AttemptCount: d.AttemptCount,
		}
	}
	return s.reply(w, http.StatusOK, out)
}

type eventListItemJSON struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Key       string          `json:"key,omitempty"`
	Version   *int64          `json:"version,omitempty"`
	Tenant    string          `json:"tenant,omitempty"`
	Data      json.RawMessage `json:"data"`
	Timestamp string          `json:"timestamp"`
}

// eventList answers GET /v1/events: newest first, filtered by exact type
// and key and a time window. The cursor holds (created_at, id) because
// producers may choose event ids.
func (s *server) eventList(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	limit, err := limitParam(q)
	if err != nil {
		return err
	}
	params := &store.EventListParams{Type: q.Get("type"), Key: q.Get("key"), Limit: limit}
	if params.Type != "" {
		if err := herald.CheckEventTypePattern(params.Type); err != nil {
			return herald.FieldErrorf(herald.CodeInvalidField, "type", "type %s", err)
		}
	}
	// exclude_system=true leaves out herald's own herald.* events (the
	// dashboard's event list does), which would otherwise crowd out the
	// application's after a run of dead letters.
	switch v := q.Get("exclude_system"); v {
	case "", "false":
	case "true":
		params.ExcludeSystem = true
	default:
		return herald.FieldErrorf(herald.CodeInvalidField, "exclude_system", "exclude_system must be true or false, not %s", quote(v))
	}
	if params.Tenant, err = tenantFilter(r, q); err != nil {
		return err
	}
	if params.Since, params.Until, err = timeWindow(q); err != nil {
		return err
	}
	if c := q.Get("cursor"); c != "" {
		cur, ok := decodeEventCursor(c)
		if !ok {
			return herald.FieldErrorf(herald.CodeInvalidCursor, "cursor",
				"cursor is not one this API returned; pass next_cursor from the previous page unchanged")
		}
		params.After = cur
	}
	res, err := s.store.EventList(r.Context(), params)
	if err != nil {
		return err
	}
	out := listJSON[eventListItemJSON]{Data: make([]eventListItemJSON, len(res.Events))}
	for i, ev := range res.Events {
		data := ev.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		out.Data[i] = eventListItemJSON{ID: ev.ID, Type: ev.Type, Key: ev.Key, Version: ev.Version, Tenant: ev.Tenant,
			Data: data, Timestamp: timestamp(ev.CreatedAt)}
	}
	if n := len(res.Events); n > 0 && res.More {
		c := encodeEventCursor(res.Events[n-1])
		out.NextCursor = &c
	}
	return s.reply(w, http.StatusOK, out)
}

func encodeEventCursor(ev *herald.Event) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(ev.CreatedAt.UnixMilli(), 10) + ":" + ev.ID))
}

func decodeEventCursor(c string) (*store.EventCursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, false
	}
	msStr, id, ok := strings.Cut(string(b), ":")
	if !ok || id == "" || len(id) > maxCursorID {
		return nil, false
	}
	ms, err := strconv.ParseInt(msStr, 10, 64)
	if err != nil {
		return nil, false
	}
	return &store.EventCursor{CreatedAt: time.UnixMilli(ms).UTC(), ID: id}, true
}

// DecodeEvent decodes and validates one event object by the rules of POST
// /v1/events (the body of a single publish). Sources (package source)
// validate the events they map with it, so a broker message is accepted
// exactly when the same event would be by the API.
func DecodeEvent(body []byte) (*herald.Event, error) { return decodeEvent(body) }
