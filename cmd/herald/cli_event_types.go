package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/heraldhq/herald/client"
)

// herald event-types: the event type catalog (writes need the admin
// token; any token lists and reads).

func eventTypeCommands() []command {
	return []command{
		{group: "event-types", name: "create", summary: "add an event type to the catalog: description, JSON Schema, example (admin)", setup: eventTypeCreate},
		{group: "event-types", name: "list", summary: "list the event type catalog", setup: eventTypeList},
		{group: "event-types", name: "get", args: "NAME", nargs: 1, summary: "show an event type with its schema and example", setup: eventTypeGet},
		{group: "event-types", name: "update", args: "NAME", nargs: 1, summary: "change the fields given as flags (admin)", setup: eventTypeUpdate},
		{group: "event-types", name: "delete", args: "NAME", nargs: 1, summary: "remove an event type from the catalog (admin)", setup: eventTypeDelete},
	}
}

// etFlags are an event type's fields as flags.
type etFlags struct {
	name, description, schema, example string
	deprecated, validate               bool
	noSchema, noExample                bool
}

func (f *etFlags) register(fs *flag.FlagSet, create bool) {
	if create {
		fs.StringVar(&f.name, "name", "", "the exact event type, e.g. order.placed (required; no * or ?, not herald.*)")
	}
	fs.StringVar(&f.description, "description", "", "what the event means (at most 1 KiB)")
	fs.StringVar(&f.schema, "schema", "", "JSON Schema of the event's data, or @file with it (at most 64 KiB; $ref only inside it)")
	fs.StringVar(&f.example, "example", "", "example data (JSON), or @file with it; must conform to the schema")
	fs.BoolVar(&f.deprecated, "deprecated", false, "forms stop offering the type (--deprecated=false undoes)")
	fs.BoolVar(&f.validate, "validate", false, "refuse publishes whose data does not conform to the schema (--validate=false stops)")
	if !create {
		fs.BoolVar(&f.noSchema, "no-schema", false, "remove the schema (and validation with it)")
		fs.BoolVar(&f.noExample, "no-example", false, "remove the example")
	}
}

// jsonFlag reads a JSON flag value given inline or as @file.
func jsonFlag(name, v string) (json.RawMessage, error) {
	if file, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, usagef("--%s: %v", name, err)
		}
		v = string(b)
	}
	return jsonArg(name, strings.TrimSpace(v))
}

// body builds the request body from the flags given.
func (f *etFlags) body(fs *flag.FlagSet) (map[string]any, error) {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	b := map[string]any{}
	if set["description"] {
		b["description"] = f.description
	}
	for _, j := range []struct {
		name, v string
		none    bool
	}{{"schema", f.schema, f.noSchema}, {"example", f.example, f.noExample}} {
		switch {
		case set[j.name] && j.none:
			return nil, usagef("--%s and --no-%s exclude each other", j.name, j.name)
		case j.none:
			b[j.name] = nil
		case set[j.name]:
			raw, err := jsonFlag(j.name, j.v)
			if err != nil {
				return nil, err
			}
			b[j.name] = raw
		}
	}
	if set["deprecated"] {
		b["deprecated"] = f.deprecated
	}
	if set["validate"] {
		b["validate"] = f.validate
	}
	return b, nil
}

func eventTypeCreate(fs *flag.FlagSet) action {
	var f etFlags
	f.register(fs, true)
	return func(ctx context.Context, c *cli, _ []string) error {
		if f.name == "" {
			return usagef("--name is required")
		}
		b, err := f.body(fs)
		if err != nil {
			return err
		}
		in := client.EventTypeInput{Name: f.name, Description: f.description, Deprecated: f.deprecated, Validate: f.validate}
		in.Schema, _ = b["schema"].(json.RawMessage)
		in.Example, _ = b["example"].(json.RawMessage)
		et, err := c.api.CreateEventType(ctx, in)
		if err != nil {
			return err
		}
		return c.showEventType(et)
	}
}

func eventTypeList(fs *flag.FlagSet) action {
	limit := fs.Int("limit", 0, "list at most this many (0: all)")
	deprecated := fs.Bool("include-deprecated", false, "also list deprecated types")
	return func(ctx context.Context, c *cli, _ []string) error {
		return listPages(c, *limit, []string{"NAME", "DESCRIPTION", "SCHEMA", "VALIDATE", "DEPRECATED"},
			func(n int, cursor string) ([]client.EventType, *string, error) {
				res, err := c.api.ListEventTypes(ctx, n, cursor, *deprecated)
				if err != nil {
					return nil, nil, err
				}
				return res.Data, res.NextCursor, nil
			},
			func(et *client.EventType) []any {
				return []any{et.Name, ellipsis(oneLine(et.Description), 60), hasJSON(et.Schema), et.Validate, et.Deprecated}
			})
	}
}

// hasJSON is "yes" for a JSON value, "no" for none (null).
func hasJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "no"
	}
	return "yes"
}

// showEventType prints an event type: its fields, then schema and
// example indented.
func (c *cli) showEventType(et *client.EventType) error {
	if c.json {
		return c.out(et)
	}
	tw := c.table()
	row(tw, "name", et.Name)
	row(tw, "description", et.Description)
	row(tw, "validate", et.Validate)
	row(tw, "deprecated", et.Deprecated)
	row(tw, "created_at", et.CreatedAt)
	row(tw, "updated_at", et.UpdatedAt)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, j := range []struct {
		name string
		raw  json.RawMessage
	}{{"schema", et.Schema}, {"example", et.Example}} {
		if hasJSON(j.raw) == "no" {
			continue
		}
		var out bytes.Buffer
		if err := json.Indent(&out, j.raw, "  ", "  "); err != nil {
			out.Reset()
			out.Write(j.raw)
		}
		fmt.Fprintf(c.stdout, "\n%s:\n  %s\n", j.name, out.String())
	}
	return nil
}

func eventTypeGet(_ *flag.FlagSet) action {
	return func(ctx context.Context, c *cli, args []string) error {
		et, err := c.api.GetEventType(ctx, args[0])
		if err != nil {
			return err
		}
		return c.showEventType(et)
	}
}

func eventTypeUpdate(fs *flag.FlagSet) action {
	var f etFlags
	f.register(fs, false)
	return func(ctx context.Context, c *cli, args []string) error {
		patch, err := f.body(fs)
		if err != nil {
			return err
		}
		if len(patch) == 0 {
			return usagef("nothing to change: give the fields to change as flags (herald event-types update -h)")
		}
		et, err := c.api.UpdateEventType(ctx, args[0], patch)
		if err != nil {
			return err
		}
		return c.showEventType(et)
	}
}

func eventTypeDelete(_ *flag.FlagSet) action {
	return func(ctx context.Context, c *cli, args []string) error {
		if err := c.api.DeleteEventType(ctx, args[0]); err != nil {
			return err
		}
		if c.json {
			return c.out(map[string]any{"name": args[0], "deleted": true})
		}
		fmt.Fprintf(c.stdout, "deleted %s\n", args[0])
		return nil
	}
}
