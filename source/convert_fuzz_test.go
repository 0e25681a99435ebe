package source

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/httpapi"
)

// FuzzConvert feeds arbitrary message bodies, routes and ids through a
// mapping that reads every part of the message document: Convert never
// panics, says why when it refuses, and what it accepts is an event the
// API accepts too (its own JSON decodes again to the same event).
func FuzzConvert(f *testing.F) {
	for _, s := range [][3]string{
		{`{"id":"a","kind":"t","v":1,"doc":"d","data":{"x":1}}`, "r.k", "m-1"},
		{`{"kind":"herald.x"}`, "", ""},
		{`{"kind":"a\u0000"}`, "r", ""},
		{`not json`, "r", "m"},
		{"{\"kind\":\"\xff\"}", "r", ""},
		{`{"kind":"t","v":1.5}`, "r", ""},
		{`{"kind":"t","v":"12"}`, "r", ""},
		{`{"kind":["a"],"doc":{"o":1}}`, "r", ""},
		{`[1,2,3]`, "route", "id"},
		{`{"kind":"t","tenant":"other"}`, "r", ""},
	} {
		f.Add([]byte(s[0]), s[1], s[2])
	}
	src := &herald.Source{Type: herald.DestinationAMQP, Tenant: "acme", Mapping: &herald.SourceMapping{
		ID: "body.id", Type: "body.kind || routing_key", Key: "body.doc", Version: "body.v",
		Tenant: "body.tenant", Data: "body.data || headers"}}
	c, err := NewConverter(src, httpapi.DecodeEvent, 4096)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, route, id string) {
		ev, rj := c.Convert(&Message{Body: body, Route: route, MessageID: id, Headers: map[string]string{"h": route}})
		if (ev == nil) == (rj == nil) {
			t.Fatalf("Convert must return an event or a reject, got %v and %v", ev, rj)
		}
		if rj != nil {
			if rj.Reason == "" || rj.Message == "" || !utf8.ValidString(rj.Message) {
				t.Fatalf("a reject says why, in valid UTF-8: %+v", rj)
			}
			return
		}
		if ev.Tenant != "acme" {
			t.Fatalf("a pinned source's event is its tenant's, got %q", ev.Tenant)
		}
		raw, err := json.Marshal(map[string]any{"id": ev.ID, "type": ev.Type, "key": ev.Key,
			"version": ev.Version, "tenant": ev.Tenant, "data": ev.Data})
		if err != nil {
			t.Fatal(err)
		}
		again, err := httpapi.DecodeEvent(raw)
		if err != nil {
			t.Fatalf("the API refuses an event Convert accepted: %v (%s)", err, raw)
		}
		if again.ID != ev.ID || again.Type != ev.Type || string(again.Data) != string(ev.Data) {
			t.Fatalf("re-decoded event differs: %+v vs %+v", again, ev)
		}
	})
}
