package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/client"
)

func subscriptionCommands() []command {
	return []command{
		{group: "subscriptions", name: "create", summary: "create a subscription; prints its signing secret once", setup: subscriptionCreate},
		{group: "subscriptions", name: "list", summary: "list subscriptions", setup: subscriptionList},
		{group: "subscriptions", name: "get", args: "ID", nargs: 1, summary: "show a subscription", setup: subscriptionGet},
		{group: "subscriptions", name: "update", args: "ID", nargs: 1, summary: "change the fields given as flags (a JSON merge patch)", setup: subscriptionUpdate},
		{group: "subscriptions", name: "delete", args: "ID", nargs: 1, summary: "delete a subscription (its pending deliveries are cancelled)", setup: subscriptionDelete},
		{group: "subscriptions", name: "rotate-secret", args: "ID", nargs: 1, summary: "make a new signing secret; prints it once", setup: subscriptionRotate},
		{group: "subscriptions", name: "secret", args: "ID", nargs: 1, summary: "show the signing secrets still in use", setup: subscriptionSecret},
		{group: "subscriptions", name: "test", args: "ID", nargs: 1, summary: "send a herald.test event to this subscription (--wait: show the attempt; exit 1 if it failed)", setup: subscriptionTest},
		{group: "subscriptions", name: "replay", args: "ID", nargs: 1, summary: "send past events again (--since, --until; counts and asks first; --yes in scripts)", setup: subscriptionReplay},
	}
}

// subFlags are the subscription fields as flags, named after the API's
// fields (event_types → --event-types).
type subFlags struct {
	url, method, eventTypes, filterCEL, filterJMES, filterES string
	noFilter, noRateLimit                                    bool
	secret, ordering, description, metadata, state           string
	tenant, autoDisable                                      string
	allTenants                                               bool
	keyIntervalMS, timeoutMS                                 int64
	rateMax, ratePer, maxInFlight                            int
	headers                                                  headerFlag
	dest                                                     destFlags
}

// destFlags are the destination's fields as --destination-* flags, named
// after the API's (destination.routing_key → --destination-routing-key).
type destFlags struct {
	typ, connection, exchange, routingKey, subject, stream string
	topic, pushSubscription, urgency                       string
	maxLen, ttlS                                           int64
	retain                                                 bool
}

// destFlagFields maps each --destination-* flag to its destination field.
var destFlagFields = map[string]string{
	"destination-type": "type", "destination-connection": "connection", "destination-exchange": "exchange",
	"destination-routing-key": "routing_key", "destination-subject": "subject", "destination-stream": "stream",
	"destination-maxlen": "maxlen", "destination-topic": "topic", "destination-retain": "retain",
	"destination-push-subscription": "subscription", "destination-urgency": "urgency", "destination-ttl-s": "ttl_s",
}

func (f *destFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.typ, "destination-type", "", "webhook (default with --url), webpush, amqp, nats, redis, mqtt or listen")
	fs.StringVar(&f.connection, "destination-connection", "", "amqp, nats, redis, mqtt: the connection's name (herald connections list)")
	fs.StringVar(&f.exchange, "destination-exchange", "", "amqp: exchange (default: the default exchange)")
	fs.StringVar(&f.routingKey, "destination-routing-key", "", "amqp: routing key (default: the event type)")
	fs.StringVar(&f.subject, "destination-subject", "", "nats: subject, no wildcards (default: derived from the event type)")
	fs.StringVar(&f.stream, "destination-stream", "", "redis: stream to XADD to (required for redis)")
	fs.Int64Var(&f.maxLen, "destination-maxlen", 0, "redis: trim the stream to about this many entries (0: no trimming)")
	fs.StringVar(&f.topic, "destination-topic", "", "mqtt: topic, no + or # (default: derived from the event type); webpush: Topic header (default: the event key)")
	fs.BoolVar(&f.retain, "destination-retain", false, "mqtt: publish retained")
	fs.StringVar(&f.pushSubscription, "destination-push-subscription", "", "webpush: the browser's PushSubscription JSON, or @FILE to read it from")
	fs.StringVar(&f.urgency, "destination-urgency", "", "webpush: very-low, low, normal (default) or high")
	fs.Int64Var(&f.ttlS, "destination-ttl-s", 0, "webpush: seconds the push service keeps an undelivered message (default 86400, at most 2419200)")
}

// body returns the destination object of the --destination-* flags given
// (nil when none is): on update a merge patch of the current destination,
// or its replacement when --destination-type names another type.
func (f *destFlags) body(set map[string]bool, readFile func(string) ([]byte, error)) (map[string]any, error) {
	d := map[string]any{}
	values := map[string]any{
		"type": f.typ, "connection": f.connection, "exchange": f.exchange, "routing_key": f.routingKey,
		"subject": f.subject, "stream": f.stream, "maxlen": f.maxLen, "topic": f.topic, "retain": f.retain,
		"urgency": f.urgency, "ttl_s": f.ttlS,
	}
	for flagName, field := range destFlagFields {
		if set[flagName] && field != "subscription" {
			d[field] = values[field]
		}
	}
	if set["destination-push-subscription"] {
		raw := f.pushSubscription
		if name, ok := strings.CutPrefix(raw, "@"); ok {
			b, err := readFile(name)
			if err != nil {
				return nil, usagef("--destination-push-subscription: %v", err)
			}
			raw = string(b)
		}
		ps, err := jsonArg("destination-push-subscription", strings.TrimSpace(raw))
		if err != nil {
			return nil, err
		}
		d["subscription"] = ps
	}
	if len(d) == 0 {
		return nil, nil
	}
	return d, nil
}

func (f *subFlags) register(fs *flag.FlagSet, create bool) {
	fs.StringVar(&f.url, "url", "", "webhook endpoint URL (http or https)")
	fs.StringVar(&f.method, "method", "", "webhook HTTP method: POST (default) or PUT")
	fs.StringVar(&f.eventTypes, "event-types", "", "comma-separated event type patterns, e.g. 'order.*,user.created' (none: every type)")
	fs.StringVar(&f.filterCEL, "filter-cel", "", "filter as a CEL expression, e.g. 'data.total > 100'")
	fs.StringVar(&f.filterJMES, "filter-jmespath", "", "filter as a JMESPath expression")
	fs.StringVar(&f.filterES, "filter-es-query", "", "filter as an Elasticsearch-style query (JSON)")
	fs.Var(&f.headers, "header", "extra request header NAME=VALUE (repeatable"+map[bool]string{true: ")", false: "; NAME= removes one)"}[create])
	fs.StringVar(&f.ordering, "ordering", "", "none (default), fifo or latest (per event key)")
	fs.Int64Var(&f.keyIntervalMS, "key-interval-ms", 0, "minimum gap between deliveries of one key, in ms")
	fs.IntVar(&f.rateMax, "rate-limit-max", 0, "rate limit: at most this many deliveries …")
	fs.IntVar(&f.ratePer, "rate-limit-per-seconds", 0, "… per this many seconds (default 1 with --rate-limit-max)")
	fs.IntVar(&f.maxInFlight, "max-in-flight", 0, "concurrent deliveries at most (0: no limit)")
	fs.Int64Var(&f.timeoutMS, "timeout-ms", 0, "request timeout in ms (server default 10000)")
	fs.StringVar(&f.description, "description", "", "free text")
	fs.StringVar(&f.metadata, "metadata", "", "JSON object kept with the subscription")
	fs.StringVar(&f.state, "state", "", "enabled or disabled")
	fs.StringVar(&f.autoDisable, "auto-disable", "", "auto-disable rule: FAILURES[/DURATION] (e.g. 50/72h: 50 failed attempts in a row over at least 72h), never, or default (the server's)")
	f.dest.register(fs)
	if create {
		fs.StringVar(&f.secret, "secret", "", "signing secret whsec_… (default: the server makes one)")
		fs.StringVar(&f.tenant, "tenant", "", "tenant the subscription belongs to: it receives only that tenant's events (fixed at creation)")
		fs.BoolVar(&f.allTenants, "all-tenants", false, "untenanted subscription that also receives every tenant's events (an audit sink)")
	} else {
		fs.BoolVar(&f.noFilter, "no-filter", false, "remove the filter")
		fs.BoolVar(&f.noRateLimit, "no-rate-limit", false, "remove the rate limit")
	}
}

// body builds the request body from the flags given on the command line
// only: for update it is a merge patch, so a flag left out keeps its value.
func (f *subFlags) body(fs *flag.FlagSet, create bool) (map[string]any, error) {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	b := map[string]any{}
	dest, err := f.dest.body(set, os.ReadFile)
	if err != nil {
		return nil, err
	}
	if dest != nil {
		if create && dest["type"] == nil {
			return nil, usagef("--destination-type is required with the other --destination-* flags")
		}
		b["destination"] = dest
	}
	str := func(flagName, field, v string) {
		if set[flagName] {
			b[field] = v
		}
	}
	str("url", "url", f.url)
	str("method", "method", f.method)
	str("ordering", "ordering", f.ordering)
	str("description", "description", f.description)
	str("state", "state", f.state)
	str("secret", "secret", f.secret)
	str("tenant", "tenant", f.tenant)
	if set["auto-disable"] {
		v, err := autoDisableArg(f.autoDisable)
		if err != nil {
			return nil, err
		}
		b["auto_disable"] = v
	}
	if set["all-tenants"] {
		b["all_tenants"] = f.allTenants
	}
	if set["event-types"] {
		b["event_types"] = splitList(f.eventTypes)
	}
	kinds := 0
	for _, k := range []string{"filter-cel", "filter-jmespath", "filter-es-query", "no-filter"} {
		if set[k] {
			kinds++
		}
	}
	if kinds > 1 {
		return nil, usagef("give one of --filter-cel, --filter-jmespath, --filter-es-query and --no-filter")
	}
	switch {
	case set["filter-cel"]:
		b["filter"] = map[string]any{"cel": f.filterCEL}
	case set["filter-jmespath"]:
		b["filter"] = map[string]any{"jmespath": f.filterJMES}
	case set["filter-es-query"]:
		q, err := jsonArg("filter-es-query", f.filterES)
		if err != nil {
			return nil, err
		}
		b["filter"] = map[string]any{"es_query": q}
	case set["no-filter"]:
		b["filter"] = nil
	}
	if set["header"] {
		h := map[string]any{}
		for _, kv := range f.headers.kv {
			if kv[1] == "" && !create {
				h[kv[0]] = nil // merge patch: remove
			} else {
				h[kv[0]] = kv[1]
			}
		}
		b["headers"] = h
	}
	if set["no-rate-limit"] {
		if set["rate-limit-max"] || set["rate-limit-per-seconds"] {
			return nil, usagef("--no-rate-limit and --rate-limit-* exclude each other")
		}
		b["rate_limit"] = nil
	} else if set["rate-limit-max"] || set["rate-limit-per-seconds"] {
		rl := map[string]any{}
		if set["rate-limit-max"] {
			rl["max"] = f.rateMax
		}
		if set["rate-limit-per-seconds"] {
			rl["per_seconds"] = f.ratePer
		} else if create {
			rl["per_seconds"] = 1
		}
		b["rate_limit"] = rl
	}
	if set["key-interval-ms"] {
		b["key_interval_ms"] = f.keyIntervalMS
	}
	if set["max-in-flight"] {
		b["max_in_flight"] = f.maxInFlight
	}
	if set["timeout-ms"] {
		b["timeout_ms"] = f.timeoutMS
	}
	if set["metadata"] {
		m, err := jsonArg("metadata", f.metadata)
		if err != nil {
			return nil, err
		}
		b["metadata"] = m
	}
	return b, nil
}

func subscriptionCreate(fs *flag.FlagSet) action {
	var f subFlags
	f.register(fs, true)
	return func(ctx context.Context, c *cli, _ []string) error {
		body, err := f.body(fs, true)
		if err != nil {
			return err
		}
		if f.url == "" && f.dest.typ == "" {
			return usagef("--url (a webhook) or --destination-type is required")
		}
		sub, err := c.api.CreateSubscription(ctx, body)
		if err != nil {
			return err
		}
		if c.json {
			return c.out(sub)
		}
		c.showSubscription(sub)
		fmt.Fprintf(c.stderr, "\nThe secret is shown only now; later: herald subscriptions secret %s\n", sub.ID)
		return nil
	}
}

func subscriptionList(fs *flag.FlagSet) action {
	limit := fs.Int("limit", 0, "list at most this many (0: all)")
	tenant := fs.String("tenant", "", "only this tenant's")
	return func(ctx context.Context, c *cli, _ []string) error {
		return listPages(c, *limit, []string{"ID", "STATE", "DESTINATION", "EVENT TYPES", "FILTER", "DESCRIPTION"},
			func(n int, cursor string) ([]client.Subscription, *string, error) {
				res, err := c.api.ListTenantSubscriptions(ctx, *tenant, n, cursor)
				if err != nil {
					return nil, nil, err
				}
				return res.Data, res.NextCursor, nil
			},
			func(s *client.Subscription) []any {
				return []any{s.ID, s.State, destinationText(s), strings.Join(s.EventTypes, ","), filterText(s.Filter), s.Description}
			})
	}
}

func filterText(f *client.Filter) string {
	switch {
	case f == nil:
		return ""
	case f.CEL != "":
		return "cel: " + f.CEL
	case f.JMESPath != "":
		return "jmespath: " + f.JMESPath
	case len(f.ESQuery) > 0:
		return "es_query: " + string(f.ESQuery)
	}
	return ""
}

// destinationText is a subscription's destination on one line: the
// webhook's URL (as before destinations), else the type and where.
func destinationText(s *client.Subscription) string {
	d := s.Destination
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	switch d.Type {
	case "", "webhook":
		return s.URL
	case "webpush":
		if d.Subscription != nil {
			return "webpush " + d.Subscription.Endpoint
		}
		return "webpush"
	case "amqp":
		return fmt.Sprintf("amqp %s exchange=%s routing_key=%s", str(d.Connection), or(str(d.Exchange), `""`), or(str(d.RoutingKey), "(event type)"))
	case "nats":
		return fmt.Sprintf("nats %s subject=%s", str(d.Connection), or(str(d.Subject), "(event type)"))
	case "redis":
		out := fmt.Sprintf("redis %s stream=%s", str(d.Connection), str(d.Stream))
		if d.MaxLen != nil && *d.MaxLen > 0 {
			out += fmt.Sprintf(" maxlen=%d", *d.MaxLen)
		}
		return out
	case "mqtt":
		out := fmt.Sprintf("mqtt %s topic=%s", str(d.Connection), or(str(d.Topic), "(event type)"))
		if d.Retain != nil && *d.Retain {
			out += " retain"
		}
		return out
	}
	return d.Type
}

// autoDisableArg turns --auto-disable into the API's auto_disable value.
func autoDisableArg(v string) (any, error) {
	switch v {
	case "never":
		return nil, nil
	case "default":
		return "default", nil
	}
	n, dur, _ := strings.Cut(v, "/")
	failures, err := strconv.Atoi(n)
	if err != nil || failures < 1 {
		return nil, usagef("--auto-disable: want FAILURES[/DURATION] (e.g. 50/72h), never or default, got %q", v)
	}
	rule := map[string]any{"consecutive_failures": failures}
	if dur != "" {
		d, err := time.ParseDuration(dur)
		if err != nil || d < 0 {
			return nil, usagef("--auto-disable: %q is not a duration (e.g. 72h)", dur)
		}
		rule["min_duration_s"] = int64(d / time.Second)
	}
	return rule, nil
}

// healthText is a subscription's health in one line.
func healthText(h *client.SubscriptionHealth) string {
	if h == nil {
		return ""
	}
	var parts []string
	if h.ConsecutiveFailures > 0 {
		since := ""
		if h.FailingSince != nil {
			since = " since " + *h.FailingSince
		}
		parts = append(parts, fmt.Sprintf("%d failed %s in a row%s", h.ConsecutiveFailures, plural(h.ConsecutiveFailures, "attempt"), since))
	} else {
		parts = append(parts, "no failures since the last success")
	}
	if h.SuccessRate24h != nil {
		parts = append(parts, fmt.Sprintf("%.1f%% of %d %s succeeded in 24h", 100**h.SuccessRate24h, h.Attempts24h, plural(int(h.Attempts24h), "attempt")))
	} else {
		parts = append(parts, "no attempts in 24h")
	}
	return strings.Join(parts, "; ")
}

// autoDisableText is the rule in force, as health shows it.
func autoDisableText(h *client.SubscriptionHealth) string {
	if h == nil {
		return ""
	}
	if h.AutoDisable == nil {
		return "never"
	}
	return fmt.Sprintf("after %d failed attempts in a row over at least %s",
		h.AutoDisable.ConsecutiveFailures, time.Duration(h.AutoDisable.MinDurationS)*time.Second)
}

func (c *cli) showSubscription(s *client.Subscription) {
	tw := c.table()
	row(tw, "id", s.ID)
	if t := s.Destination.Type; t == "" || t == "webhook" {
		row(tw, "url", s.Method+" "+s.URL)
	} else {
		row(tw, "destination", destinationText(s))
		if d := s.Destination; d.Type == "webpush" && d.Urgency != nil && d.TTLS != nil {
			row(tw, "push", fmt.Sprintf("urgency %s, ttl %ds", *d.Urgency, *d.TTLS))
		}
	}
	row(tw, "state", strings.TrimSpace(s.State+" "+s.DisabledReason))
	if s.Health != nil {
		row(tw, "health", healthText(s.Health))
		row(tw, "auto_disable", autoDisableText(s.Health))
	}
	if s.Tenant != "" {
		row(tw, "tenant", s.Tenant)
	}
	if s.AllTenants {
		row(tw, "all_tenants", "true (receives every tenant's events)")
	}
	row(tw, "event_types", strings.Join(s.EventTypes, ","))
	row(tw, "filter", filterText(s.Filter))
	row(tw, "ordering", s.Ordering)
	if s.KeyIntervalMS > 0 {
		row(tw, "key_interval_ms", s.KeyIntervalMS)
	}
	if s.RateLimit != nil {
		row(tw, "rate_limit", fmt.Sprintf("%d per %ds", s.RateLimit.Max, s.RateLimit.PerSeconds))
	}
	if s.MaxInFlight > 0 {
		row(tw, "max_in_flight", s.MaxInFlight)
	}
	row(tw, "timeout_ms", s.TimeoutMS)
	for k, v := range s.Headers {
		row(tw, "header", k+": "+v)
	}
	row(tw, "description", s.Description)
	if len(s.Metadata) > 0 && string(s.Metadata) != "{}" {
		row(tw, "metadata", string(s.Metadata))
	}
	row(tw, "created_at", s.CreatedAt)
	row(tw, "updated_at", s.UpdatedAt)
	if s.Secret != "" {
		row(tw, "secret", s.Secret)
	}
	_ = tw.Flush()
}

func subscriptionGet(fs *flag.FlagSet) action {
	return func(ctx context.Context, c *cli, args []string) error {
		sub, err := c.api.GetSubscription(ctx, args[0])
		if err != nil {
			return err
		}
		if c.json {
			return c.out(sub)
		}
		c.showSubscription(sub)
		return nil
	}
}

func subscriptionUpdate(fs *flag.FlagSet) action {
	var f subFlags
	f.register(fs, false)
	return func(ctx context.Context, c *cli, args []string) error {
		patch, err := f.body(fs, false)
		if err != nil {
			return err
		}
		if len(patch) == 0 {
			return usagef("nothing to change: give the fields to change as flags (herald subscriptions update -h)")
		}
		sub, err := c.api.UpdateSubscription(ctx, args[0], patch)
		if err != nil {
			return err
		}
		if c.json {
			return c.out(sub)
		}
		c.showSubscription(sub)
		return nil
	}
}

func subscriptionDelete(fs *flag.FlagSet) action {
	return func(ctx context.Context, c *cli, args []string) error {
		if err := c.api.DeleteSubscription(ctx, args[0]); err != nil {
			return err
		}
		if c.json {
			return c.out(map[string]any{"id": args[0], "deleted": true})
		}
		fmt.Fprintf(c.stdout, "deleted %s\n", args[0])
		return nil
	}
}

func (c *cli) showSecrets(s *client.Secrets) error {
	if c.json {
		return c.out(s)
	}
	tw := c.table("SECRET", "CREATED", "EXPIRES")
	for _, sec := range s.Secrets {
		exp := ""
		if sec.ExpiresAt != nil {
			exp = *sec.ExpiresAt
		}
		row(tw, sec.Secret, sec.CreatedAt, exp)
	}
	return tw.Flush()
}

func subscriptionRotate(fs *flag.FlagSet) action {
	secret := fs.String("secret", "", "the new secret whsec_… (default: the server makes one)")
	grace := fs.Int64("grace-period-s", -1, "seconds the older secrets keep signing (default: the server's, 24h)")
	return func(ctx context.Context, c *cli, args []string) error {
		p := client.RotateSecretParams{Secret: *secret}
		if *grace >= 0 {
			p.GracePeriodS = grace
		}
		s, err := c.api.RotateSecret(ctx, args[0], p)
		if err != nil {
			return err
		}
		if c.json {
			return c.out(s)
		}
		fmt.Fprintf(c.stdout, "new secret: %s\n\n", s.Secret)
		return c.showSecrets(s)
	}
}

func subscriptionSecret(fs *flag.FlagSet) action {
	return func(ctx context.Context, c *cli, args []string) error {
		s, err := c.api.GetSecret(ctx, args[0])
		if err != nil {
			return err
		}
		return c.showSecrets(s)
	}
}

func subscriptionTest(fs *flag.FlagSet) action {
	data := fs.String("data", "", "the test event's data (JSON; default: a short message)")
	wait := fs.Bool("wait", false, "wait until the test delivery has an outcome and show its attempt; exit 1 unless delivered")
	timeout := fs.Duration("wait-timeout", 60*time.Second, "with --wait: give up after this long")
	return func(ctx context.Context, c *cli, args []string) error {
		var raw json.RawMessage
		if *data != "" {
			var err error
			if raw, err = jsonArg("data", *data); err != nil {
				return err
			}
		}
		res, err := c.api.TestSubscription(ctx, args[0], raw)
		if err != nil {
			return err
		}
		if !*wait {
			if c.json {
				return c.out(res)
			}
			fmt.Fprintf(c.stdout, "queued test event %s as delivery %s\n", res.EventID, res.DeliveryID)
			return nil
		}
		d, err := c.waitDelivery(ctx, res.DeliveryID, *timeout)
		if err != nil {
			return err
		}
		if err := c.showDelivery(d); err != nil {
			return err
		}
		// A script asking "does this endpoint work?" gets its answer in
		// the exit code too.
		if d.State != "delivered" {
			return fmt.Errorf("test delivery %s is %s: %s", d.ID, d.State, lastOutcome(d))
		}
		return nil
	}
}

// waitDelivery polls a delivery until it has an attempt and is no longer
// in flight, or has reached a final state. Polls start at 100 ms and
// slow to 1 s.
func (c *cli) waitDelivery(ctx context.Context, id string, timeout time.Duration) (*client.Delivery, error) {
	deadline := time.Now().Add(timeout)
	wait := 100 * time.Millisecond
	for {
		d, err := c.api.GetDelivery(ctx, id)
		if err != nil {
			return nil, err
		}
		if d.Final() || (d.AttemptCount > 0 && d.State != "in_flight") {
			return d, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("delivery %s is still %s after %s (waiting for %s); see herald deliveries get %s",
				id, d.State, timeout, deref(d.WaitingFor, "its turn"), id)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Second)
	}
}

func deref(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

// plural is word with an "s" unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
