package httpapi

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"

	"github.com/heraldhq/herald"
)

// Subscription destinations (issue 22): the "destination" object of a
// subscription body, its rules per type, the connection checks a broker
// destination needs, and its view. A body with only "url" (and "method")
// is a webhook, as before destinations existed.

// subscriptionRules are the server settings decoding depends on.
type subscriptionRules struct {
	// allowHTTPPush accepts http:// Web Push endpoints (herald serve
	// --dev, for a push service on the machine).
	allowHTTPPush bool
}

// destinationTypeFields are the keys a destination of each type may have
// besides "type".
var destinationTypeFields = map[herald.DestinationType][]string{
	herald.DestinationWebhook: {"url", "method"},
	herald.DestinationWebPush: {"subscription", "urgency", "ttl_s", "topic"},
	herald.DestinationAMQP:    {"connection", "exchange", "routing_key"},
	herald.DestinationNATS:    {"connection", "subject"},
	herald.DestinationRedis:   {"connection", "stream", "maxlen"},
	herald.DestinationMQTT:    {"connection", "topic", "retain"},
	herald.DestinationListen:  {},
}

// destinationFields are the keys of every type: a key of another type is
// invalid_field naming it, a key of none unknown_field.
var destinationFields = func() []string {
	out := []string{"type"}
	for _, t := range herald.DestinationTypes {
		for _, f := range destinationTypeFields[t] {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}()

// decodeDestination decodes "destination", or, without one, the webhook
// of "url" and "method". It sets s.Destination, and s.URL and s.Method
// for a webhook ("" for other types).
func decodeDestination(o object, s *herald.Subscription, rules subscriptionRules) error {
	raw, ok := o.get("destination")
	if !ok {
		if err := decodeURL(o, s); err != nil {
			return err
		}
		if err := decodeMethod(o, s); err != nil {
			return err
		}
		s.Destination = herald.Destination{Type: herald.DestinationWebhook, URL: s.URL, Method: s.Method}
		return nil
	}
	do, err := parseObject(raw, "destination")
	if err != nil {
		return err
	}
	if err := do.allow(destinationFields...); err != nil {
		return err
	}
	var typ string
	set, err := do.str("type", &typ)
	if err != nil {
		return err
	}
	if !set {
		return herald.FieldErrorf(herald.CodeMissingField, "destination.type", "destination.type is required")
	}
	t := herald.DestinationType(typ)
	if !t.Valid() {
		return invalid("destination.type", "must be one of webhook, webpush, amqp, nats, redis, mqtt or listen, got %s", quote(typ))
	}
	names := make([]string, 0, len(do.fields))
	for k := range do.fields {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if _, set := do.get(k); set && k != "type" && !slices.Contains(destinationTypeFields[t], k) {
			return invalid(do.at(k), "does not apply to a %s destination", t)
		}
	}
	if t == herald.DestinationWebhook {
		return decodeWebhookDestination(o, do, s)
	}
	for _, f := range []string{"url", "method"} {
		if _, set := o.get(f); set {
			return invalid(f, "applies to webhook destinations only; a %s destination takes its settings inside destination", t)
		}
	}
	s.URL, s.Method = "", ""
	d := herald.Destination{Type: t}
	var decode func(object, *herald.Destination) error
	switch t {
	case herald.DestinationWebPush:
		decode = func(do object, d *herald.Destination) error { return decodeWebPush(do, d, rules) }
	case herald.DestinationAMQP:
		decode = decodeAMQP
	case herald.DestinationNATS:
		decode = decodeNATS
	case herald.DestinationRedis:
		decode = decodeRedis
	case herald.DestinationMQTT:
		decode = decodeMQTT
	case herald.DestinationListen:
		// No settings: the listener connected to the subscription is
		// the destination (GET /v1/subscriptions/{id}/listen).
		decode = func(object, *herald.Destination) error { return nil }
	}
	if t.UsesConnection() {
		set, err := do.str("connection", &d.Connection)
		if err != nil {
			return err
		}
		if !set || d.Connection == "" {
			return herald.FieldErrorf(herald.CodeMissingField, "destination.connection",
				"destination.connection is required: the name of a connection an admin created (GET /v1/connections)")
		}
		if !herald.ValidConnectionName(d.Connection) {
			return invalid("destination.connection", "is not a connection name")
		}
	}
	if err := decode(do, &d); err != nil {
		return err
	}
	s.Destination = d
	return nil
}

// decodeWebhookDestination: destination {type: webhook, url, method}; the
// top-level url and method may be given too, but must agree with it.
func decodeWebhookDestination(o, do object, s *herald.Subscription) error {
	for _, f := range []struct {
		name  string
		dst   *string
		check func(path string, s *herald.Subscription) error
	}{{"url", &s.URL, checkWebhookURL}, {"method", &s.Method, checkMethod}} {
		var top, inner string
		topSet, err := o.str(f.name, &top)
		if err != nil {
			return err
		}
		innerSet, err := do.str(f.name, &inner)
		if err != nil {
			return err
		}
		path := f.name
		switch {
		case topSet && innerSet && !(top == inner || f.name == "method" && strings.EqualFold(top, inner)):
			return invalid(f.name, "and destination.%s disagree; send one of them", f.name)
		case innerSet:
			*f.dst, path = inner, "destination."+f.name
		case topSet:
			*f.dst = top
		case f.name == "url":
			return herald.FieldErrorf(herald.CodeMissingField, "destination.url", "destination.url is required")
		}
		if err := f.check(path, s); err != nil {
			return err
		}
	}
	s.Destination = herald.Destination{Type: herald.DestinationWebhook, URL: s.URL, Method: s.Method}
	return nil
}

func decodeWebPush(do object, d *herald.Destination, rules subscriptionRules) error {
	raw, ok := do.get("subscription")
	if !ok {
		return herald.FieldErrorf(herald.CodeMissingField, "destination.subscription",
			"destination.subscription is required: the browser's PushSubscription (JSON.stringify(subscription))")
	}
	so, err := parseObject(raw, "destination.subscription")
	if err != nil {
		return err
	}
	// PushSubscription.toJSON() has expirationTime (usually null): taken
	// and ignored, so the browser's JSON can be pasted as it is.
	if err := so.allow("endpoint", "keys", "expirationTime"); err != nil {
		return err
	}
	ps := &herald.PushSubscription{}
	if _, err := so.str("endpoint", &ps.Endpoint); err != nil {
		return err
	}
	if kraw, ok := so.get("keys"); ok {
		ko, err := parseObject(kraw, "destination.subscription.keys")
		if err != nil {
			return err
		}
		if err := ko.allow("p256dh", "auth"); err != nil {
			return err
		}
		if _, err := ko.str("p256dh", &ps.Keys.P256DH); err != nil {
			return err
		}
		if _, err := ko.str("auth", &ps.Keys.Auth); err != nil {
			return err
		}
	}
	if err := herald.ValidatePushSubscription(ps, rules.allowHTTPPush); err != nil {
		var he *herald.Error
		if errors.As(err, &he) {
			path := "destination.subscription." + he.Field
			return herald.FieldErrorf(he.Code, path, "%s %s", path, he.Message)
		}
		return err
	}
	d.Subscription = ps
	d.Urgency = herald.DefaultPushUrgency
	if _, err := do.str("urgency", &d.Urgency); err != nil {
		return err
	}
	if !slices.Contains(herald.PushUrgencies, d.Urgency) {
		return invalid("destination.urgency", "must be one of very-low, low, normal or high")
	}
	ttl := int64(herald.DefaultPushTTLS)
	if _, err := do.integer("ttl_s", &ttl); err != nil {
		return err
	}
	if ttl < 0 || ttl > herald.MaxPushTTLS {
		return invalid("destination.ttl_s", "must be from 0 to %d (28 days)", herald.MaxPushTTLS)
	}
	n := int(ttl)
	d.TTLS = &n
	if _, err := do.str("topic", &d.Topic); err != nil {
		return err
	}
	if err := herald.CheckPushTopic(d.Topic); err != nil {
		return invalid("destination.topic", "%s", err)
	}
	return nil
}

// brokerName decodes an optional string field of a broker destination
// and checks it with check when not empty.
func brokerName(do object, name string, dst *string, check func(string) error) error {
	set, err := do.str(name, dst)
	if err != nil || !set || *dst == "" {
		return err
	}
	if err := check(*dst); err != nil {
		return invalid(do.at(name), "%s", err)
	}
	return nil
}

func decodeAMQP(do object, d *herald.Destination) error {
	if err := brokerName(do, "exchange", &d.Exchange, herald.CheckAMQPExchange); err != nil {
		return err
	}
	return brokerName(do, "routing_key", &d.RoutingKey, herald.CheckAMQPRoutingKey)
}

func decodeNATS(do object, d *herald.Destination) error {
	return brokerName(do, "subject", &d.Subject, herald.CheckNATSSubject)
}

func decodeRedis(do object, d *herald.Destination) error {
	set, err := do.str("stream", &d.Stream)
	if err != nil {
		return err
	}
	if !set {
		return herald.FieldErrorf(herald.CodeMissingField, "destination.stream", "destination.stream is required")
	}
	if err := herald.CheckRedisStream(d.Stream); err != nil {
		return invalid("destination.stream", "%s", err)
	}
	if _, err := do.integer("maxlen", &d.MaxLen); err != nil {
		return err
	}
	if d.MaxLen < 0 {
		return invalid("destination.maxlen", "must be 0 (no trimming) or more")
	}
	return nil
}

func decodeMQTT(do object, d *herald.Destination) error {
	if err := brokerName(do, "topic", &d.Topic, herald.CheckMQTTTopic); err != nil {
		return err
	}
	var err error
	d.Retain, err = do.boolean("retain")
	return err
}

// checkDestinationConnection checks the connection a broker destination
// names: it exists, has the destination's type, and is granted to the
// subscription's tenant. For a tenanted subscription an unknown connection
// is answered like a connection not granted (403), so a tenant cannot
// probe which connections exist.
func (s *server) checkDestinationConnection(ctx context.Context, sub *herald.Subscription) error {
	d := sub.Dest()
	if !d.Type.UsesConnection() {
		return nil
	}
	forbidden := func() error {
		return herald.Errorf(herald.CodeForbidden, "connection %s is not granted to tenant %s", quote(d.Connection), quote(sub.Tenant))
	}
	c, err := s.store.ConnectionGet(ctx, d.Connection)
	if errors.Is(err, herald.ErrNotFound) {
		if sub.Tenant != "" {
			return forbidden()
		}
		return invalid("destination.connection", "%s does not exist (create it with POST /v1/connections)", quote(d.Connection))
	}
	if err != nil {
		return err
	}
	if !c.Allows(sub.Tenant) {
		return forbidden()
	}
	if c.Type != d.Type {
		return invalid("destination.connection", "%s is a %s connection, not %s", quote(d.Connection), c.Type, d.Type)
	}
	return nil
}

// destinationJSON is a destination as the API shows it: every field of
// its type, defaults included ("" routing key, subject or topic: derived
// from the event type when sent), none of the others.
type destinationJSON struct {
	Type         herald.DestinationType   `json:"type"`
	URL          *string                  `json:"url,omitempty"`
	Method       *string                  `json:"method,omitempty"`
	Subscription *herald.PushSubscription `json:"subscription,omitempty"`
	Urgency      *string                  `json:"urgency,omitempty"`
	TTLS         *int                     `json:"ttl_s,omitempty"`
	Connection   *string                  `json:"connection,omitempty"`
	Exchange     *string                  `json:"exchange,omitempty"`
	RoutingKey   *string                  `json:"routing_key,omitempty"`
	Subject      *string                  `json:"subject,omitempty"`
	Stream       *string                  `json:"stream,omitempty"`
	MaxLen       *int64                   `json:"maxlen,omitempty"`
	Topic        *string                  `json:"topic,omitempty"`
	Retain       *bool                    `json:"retain,omitempty"`
}

// destinationView renders sub's destination; a webhook's from sub.URL and
// sub.Method (already masked for readers who may not see credentials).
func destinationView(sub *herald.Subscription, method string) destinationJSON {
	d := sub.Dest()
	v := destinationJSON{Type: d.Type}
	switch d.Type {
	case herald.DestinationWebhook:
		v.URL, v.Method = &sub.URL, &method
	case herald.DestinationWebPush:
		urgency, ttl := d.Urgency, herald.DefaultPushTTLS
		if urgency == "" {
			urgency = herald.DefaultPushUrgency
		}
		if d.TTLS != nil {
			ttl = *d.TTLS
		}
		v.Subscription, v.Urgency, v.TTLS, v.Topic = d.Subscription, &urgency, &ttl, &d.Topic
	case herald.DestinationAMQP:
		v.Connection, v.Exchange, v.RoutingKey = &d.Connection, &d.Exchange, &d.RoutingKey
	case herald.DestinationNATS:
		v.Connection, v.Subject = &d.Connection, &d.Subject
	case herald.DestinationRedis:
		v.Connection, v.Stream, v.MaxLen = &d.Connection, &d.Stream, &d.MaxLen
	case herald.DestinationMQTT:
		v.Connection, v.Topic, v.Retain = &d.Connection, &d.Topic, &d.Retain
	}
	return v
}

// maskPushSubscription returns ps with its capabilities masked for a
// reader without subscriptions:write: the endpoint's path (the push
// service's token for this browser) and keys.auth. p256dh is a public key.
func maskPushSubscription(ps *herald.PushSubscription) *herald.PushSubscription {
	if ps == nil {
		return nil
	}
	c := *ps
	if u, err := url.Parse(ps.Endpoint); err == nil {
		c.Endpoint = u.Scheme + "://" + u.Host + "/" + maskedCredential
	} else {
		c.Endpoint = maskedCredential
	}
	c.Keys.Auth = maskedCredential
	return &c
}

// mergeDestination applies a PATCH's destination to the current document.
// A patch naming another type (or a top-level url or method, which means
// a webhook) replaces the destination; one of the same type (or without a
// type) is merged into it, as RFC 7396 says.
func mergeDestination(doc, patch map[string]any) {
	cur, _ := doc["destination"].(map[string]any)
	curType, _ := cur["type"].(string)
	pd, has := patch["destination"]
	switch {
	case !has:
		_, url := patch["url"]
		_, method := patch["method"]
		if url || method {
			// A webhook given by url/method: drop the destination the
			// document had, so url and method say it alone.
			delete(doc, "destination")
			if curType != string(herald.DestinationWebhook) && !method {
				delete(doc, "method")
			}
		}
		return
	case pd == nil:
		delete(doc, "destination")
		return
	}
	p, ok := pd.(map[string]any)
	if !ok {
		doc["destination"] = pd // not an object: decode says so
		return
	}
	typ, _ := p["type"].(string)
	if typ == "" || typ == curType {
		doc["destination"] = mergePatch(cur, p)
	} else {
		doc["destination"] = pd
	}
	// The top-level url and method were the current webhook's: a patch
	// that does not repeat them lets the destination say.
	for _, f := range []string{"url", "method"} {
		if _, again := patch[f]; !again {
			delete(doc, f)
		}
	}
}

// rules are the decoding settings of this server.
func (s *server) rules() subscriptionRules {
	return subscriptionRules{allowHTTPPush: s.cfg.AllowHTTPPushEndpoints}
}
