package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/heraldhq/herald/client"
)

// herald sources: the broker queues, streams and topics (admin token)
// herald consumes events from, through connections.

func sourceCommands() []command {
	return []command{
		{group: "sources", name: "create", summary: "create a broker source herald consumes events from (admin)", setup: sourceCreate},
		{group: "sources", name: "list", summary: "list broker sources", setup: sourceList},
		{group: "sources", name: "get", args: "NAME", nargs: 1, summary: "show a source and its status: state, counters, recent rejects", setup: sourceGet},
		{group: "sources", name: "update", args: "NAME", nargs: 1, summary: "change the fields given as flags (--map-*: those expressions only)", setup: sourceUpdate},
		{group: "sources", name: "delete", args: "NAME", nargs: 1, summary: "delete a source; herald stops consuming it", setup: sourceDelete},
	}
}

// sourceStringFlags are a source's string fields as flags, flag name =
// JSON field.
var sourceStringFlags = []string{"connection", "queue", "stream", "durable", "subject", "group", "topic", "tenant"}

// sourceMappingFlags map --map-<field> to the mapping's fields.
var sourceMappingFlags = []string{"id", "type", "key", "version", "tenant", "data"}

// srcFlags are a source's fields as flags.
type srcFlags struct {
	name, typ         string
	str               map[string]*string
	mapping           map[string]*string
	ordered, disabled bool
	noMapping         bool
	prefetch          int
}

func (f *srcFlags) register(fs *flag.FlagSet, create bool) {
	if create {
		fs.StringVar(&f.name, "name", "", "the source's name (required)")
		fs.StringVar(&f.typ, "type", "", "amqp, nats, redis or mqtt: the type of its connection (required)")
	}
	help := map[string]string{
		"connection": "name of a connection of the source's type (herald connections list)",
		"queue":      "amqp: an existing queue to consume",
		"stream":     "nats: the JetStream stream; redis: the stream key (created when missing)",
		"durable":    "nats: the durable pull consumer, created when missing (default herald)",
		"subject":    "nats: optional subject filter (* and > wildcards)",
		"group":      "redis: the consumer group, created when missing (default herald)",
		"topic":      "mqtt: a topic filter (+ and # wildcards), subscribed as $share/herald/<topic>",
		"tenant":     "pin the source to a tenant: its events are that tenant's (the connection must grant it)",
	}
	f.str = map[string]*string{}
	for _, name := range sourceStringFlags {
		f.str[name] = fs.String(name, "", help[name])
	}
	mapHelp := map[string]string{
		"id": "JMESPath for the event id (default: the broker's message id, else the SHA-256 of the body); " +
			"every --map-* reads {body, headers, routing_key|subject|stream|topic, message_id, timestamp}",
		"type":    "JMESPath for the event type (default: the routing key, subject, stream or topic)",
		"key":     "JMESPath for the event key, e.g. body.content_id",
		"version": "JMESPath for the event version, e.g. body.payload_version",
		"tenant":  "JMESPath for the event tenant (default: --tenant)",
		"data":    "JMESPath for the event data (default: the whole body)",
	}
	f.mapping = map[string]*string{}
	for _, name := range sourceMappingFlags {
		f.mapping[name] = fs.String("map-"+name, "", mapHelp[name])
	}
	fs.BoolVar(&f.ordered, "ordered", false, "one node at a time consumes, so broker order is publish order (--ordered=false: every node)")
	fs.BoolVar(&f.disabled, "disabled", false, "do not consume (--disabled=false consumes again)")
	fs.IntVar(&f.prefetch, "prefetch", 0, "most messages per batch; a consumer holds up to twice that unacknowledged (0: the default, 256; at most 10000)")
	if !create {
		fs.BoolVar(&f.noMapping, "no-mapping", false, "remove the mapping: every field takes its default")
	}
}

// body builds the request body from the flags given. On update, --map-*
// flags change those expressions of cur's mapping (the API replaces the
// mapping whole), an empty one clears that expression.
func (f *srcFlags) body(fs *flag.FlagSet, create bool, cur *client.Source) (map[string]any, error) {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	b := map[string]any{}
	if create {
		if f.name == "" || f.typ == "" || *f.str["connection"] == "" {
			return nil, usagef("--name, --type and --connection are required")
		}
		b["name"], b["type"] = f.name, f.typ
	}
	for _, name := range sourceStringFlags {
		if set[name] {
			b[name] = *f.str[name]
		}
	}
	mapping := map[string]string{}
	if cur != nil && cur.Mapping != nil {
		m := cur.Mapping
		for k, v := range map[string]string{"id": m.ID, "type": m.Type, "key": m.Key, "version": m.Version, "tenant": m.Tenant, "data": m.Data} {
			if v != "" {
				mapping[k] = v
			}
		}
	}
	changed := false
	for _, name := range sourceMappingFlags {
		if !set["map-"+name] {
			continue
		}
		changed = true
		if v := *f.mapping[name]; v != "" {
			mapping[name] = v
		} else {
			delete(mapping, name)
		}
	}
	switch {
	case f.noMapping && changed:
		return nil, usagef("--no-mapping and --map-* exclude each other")
	case f.noMapping:
		b["mapping"] = nil
	case changed && len(mapping) == 0:
		b["mapping"] = nil
	case changed:
		b["mapping"] = mapping
	}
	if set["ordered"] {
		b["ordered"] = f.ordered
	}
	if set["disabled"] {
		b["enabled"] = !f.disabled
	}
	if set["prefetch"] {
		b["prefetch"] = f.prefetch
	}
	return b, nil
}

func sourceCreate(fs *flag.FlagSet) action {
	var f srcFlags
	f.register(fs, true)
	return func(ctx context.Context, c *cli, _ []string) error {
		body, err := f.body(fs, true, nil)
		if err != nil {
			return err
		}
		in := client.SourceInput{Name: f.name, Type: f.typ, Connection: *f.str["connection"],
			Queue: *f.str["queue"], Stream: *f.str["stream"], Durable: *f.str["durable"], Subject: *f.str["subject"],
			Group: *f.str["group"], Topic: *f.str["topic"], Tenant: *f.str["tenant"], Ordered: f.ordered, Prefetch: f.prefetch}
		if m, ok := body["mapping"].(map[string]string); ok {
			in.Mapping = &client.SourceMapping{ID: m["id"], Type: m["type"], Key: m["key"], Version: m["version"],
				Tenant: m["tenant"], Data: m["data"]}
		}
		if f.disabled {
			in.Enabled = new(false)
		}
		src, err := c.api.CreateSource(ctx, in)
		if err != nil {
			return err
		}
		return c.showSource(src)
	}
}

func sourceList(fs *flag.FlagSet) action {
	limit := fs.Int("limit", 0, "list at most this many (0: all)")
	return func(ctx context.Context, c *cli, _ []string) error {
		return listPages(c, *limit, []string{"NAME", "TYPE", "CONNECTION", "READS", "TENANT", "ENABLED", "CREATED"},
			func(n int, cursor string) ([]client.Source, *string, error) {
				res, err := c.api.ListSources(ctx, n, cursor)
				if err != nil {
					return nil, nil, err
				}
				return res.Data, res.NextCursor, nil
			},
			func(s *client.Source) []any {
				return []any{s.Name, s.Type, s.Connection, sourceReads(s, "="), s.Tenant, s.Enabled, s.CreatedAt}
			})
	}
}

// sourceReads renders where a source reads: "queue=q", "stream=S
// durable=herald subject=a.>" (sep "=") or "queue q" (sep " ").
func sourceReads(s *client.Source, sep string) string {
	parts := []string{}
	for _, kv := range [][2]string{{"queue", s.Queue}, {"stream", s.Stream}, {"durable", s.Durable}, {"subject", s.Subject},
		{"group", s.Group}, {"topic", s.Topic}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+sep+kv[1])
		}
	}
	return strings.Join(parts, " ")
}

func mappingText(m *client.SourceMapping) string {
	if m == nil {
		return "(defaults: the body is the data)"
	}
	parts := []string{}
	for _, kv := range [][2]string{{"id", m.ID}, {"type", m.Type}, {"key", m.Key}, {"version", m.Version},
		{"tenant", m.Tenant}, {"data", m.Data}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	return strings.Join(parts, " ")
}

// showSource prints a source: with its status (get) a summary first,
// "orders (amqp, queue orders-in on rabbit-main): consuming" and the
// counters, then its settings, each node's row and the recent rejects.
func (c *cli) showSource(s *client.Source) error {
	if c.json {
		return c.out(s)
	}
	st := s.Status
	if st != nil {
		fmt.Fprintf(c.stdout, "%s (%s, %s on %s): %s\n", s.Name, s.Type, sourceReads(s, " "), s.Connection, st.State)
		pending := "unknown"
		if st.Pending != nil {
			pending = fmt.Sprint(*st.Pending)
		}
		fmt.Fprintf(c.stdout, "  consumed %d, duplicates %d, rejected %d, pending %s\n", st.Consumed, st.Duplicates, st.Rejected, pending)
		if st.LastError != "" {
			fmt.Fprintf(c.stdout, "  last error: %s\n", oneLine(st.LastError))
		}
		fmt.Fprintln(c.stdout)
	}
	tw := c.table()
	row(tw, "name", s.Name)
	row(tw, "type", s.Type)
	row(tw, "connection", s.Connection)
	row(tw, "reads", sourceReads(s, "="))
	row(tw, "mapping", mappingText(s.Mapping))
	if s.Tenant != "" {
		row(tw, "tenant", s.Tenant)
	}
	row(tw, "ordered", s.Ordered)
	row(tw, "enabled", s.Enabled)
	if s.Prefetch == 0 {
		row(tw, "prefetch", "256 (default)")
	} else {
		row(tw, "prefetch", s.Prefetch)
	}
	row(tw, "created_at", s.CreatedAt)
	row(tw, "updated_at", s.UpdatedAt)
	if err := tw.Flush(); err != nil || st == nil {
		return err
	}
	if len(st.Nodes) > 0 {
		fmt.Fprintln(c.stdout)
		tw = c.table("NODE", "STATE", "CONSUMED", "DUPLICATES", "REJECTED", "PENDING", "LAST ERROR", "REPORTED")
		for _, n := range st.Nodes {
			pending := "-"
			if n.Pending != nil {
				pending = fmt.Sprint(*n.Pending)
			}
			row(tw, n.Node, n.State, n.Consumed, n.Duplicates, n.Rejected, pending, ellipsis(n.LastError, 60), n.UpdatedAt)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(st.RecentRejects) == 0 {
		return nil
	}
	fmt.Fprintf(c.stdout, "\nrecent rejects (newest first):\n")
	tw = c.table("AT", "NODE", "REASON", "MESSAGE", "MESSAGE ID", "BODY")
	for _, r := range st.RecentRejects {
		row(tw, r.At, r.Node, r.Reason, ellipsis(r.Message, 80), r.MessageID, ellipsis(r.Excerpt, 40))
	}
	return tw.Flush()
}

// oneLine replaces control characters (line breaks in a broker's error)
// by spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

func sourceGet(_ *flag.FlagSet) action {
	return func(ctx context.Context, c *cli, args []string) error {
		s, err := c.api.GetSource(ctx, args[0])
		if err != nil {
			return err
		}
		return c.showSource(s)
	}
}

func sourceUpdate(fs *flag.FlagSet) action {
	var f srcFlags
	f.register(fs, false)
	return func(ctx context.Context, c *cli, args []string) error {
		var cur *client.Source
		mapped := false
		fs.Visit(func(fl *flag.Flag) { mapped = mapped || strings.HasPrefix(fl.Name, "map-") })
		if mapped && f.noMapping {
			return usagef("--no-mapping and --map-* exclude each other")
		}
		if mapped {
			// The API replaces the mapping whole: start from the stored one.
			var err error
			if cur, err = c.api.GetSource(ctx, args[0]); err != nil {
				return err
			}
		}
		patch, err := f.body(fs, false, cur)
		if err != nil {
			return err
		}
		if len(patch) == 0 {
			return usagef("nothing to change: give the fields to change as flags (herald sources update -h)")
		}
		s, err := c.api.UpdateSource(ctx, args[0], patch)
		if err != nil {
			return err
		}
		return c.showSource(s)
	}
}

func sourceDelete(_ *flag.FlagSet) action {
	return func(ctx context.Context, c *cli, args []string) error {
		if err := c.api.DeleteSource(ctx, args[0]); err != nil {
			return err
		}
		if c.json {
			return c.out(map[string]any{"name": args[0], "deleted": true})
		}
		fmt.Fprintf(c.stdout, "deleted %s\n", args[0])
		return nil
	}
}
