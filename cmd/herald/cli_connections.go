package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/heraldhq/herald/client"
)

// herald connections: the operator-owned broker connections (admin
// token) that amqp, nats, redis and mqtt destinations name.

func connectionCommands() []command {
	return []command{
		{group: "connections", name: "create", summary: "create a broker connection (admin); its password is never shown again", setup: connectionCreate},
		{group: "connections", name: "list", summary: "list broker connections (passwords shown as ***)", setup: connectionList},
		{group: "connections", name: "get", args: "NAME", nargs: 1, summary: "show a broker connection", setup: connectionGet},
		{group: "connections", name: "update", args: "NAME", nargs: 1, summary: "change the URL, TLS or tenants given as flags", setup: connectionUpdate},
		{group: "connections", name: "delete", args: "NAME", nargs: 1, summary: "delete a broker connection (refused while a subscription or source uses it)", setup: connectionDelete},
	}
}

// connFlags are a connection's fields as flags.
type connFlags struct {
	name, typ, url, tenants               string
	caFile, certFile, keyFile, serverName string
	insecureSkipVerify, noTLS, allTenants bool
}

func (f *connFlags) register(fs *flag.FlagSet, create bool) {
	if create {
		fs.StringVar(&f.name, "name", "", "the connection's name, which destinations name (required)")
		fs.StringVar(&f.typ, "type", "", "amqp, nats, redis or mqtt (required)")
	}
	fs.StringVar(&f.url, "url", "", "broker URL: amqp[s]://, nats:// or tls://, redis[s]://, mqtt[s]:// (tcp://, ssl://); a password of *** keeps the stored one")
	fs.StringVar(&f.tenants, "tenants", "", "comma-separated tenants whose subscriptions may use it (none: untenanted subscriptions only)")
	fs.BoolVar(&f.allTenants, "all-tenants", false, "every tenant's subscriptions may use it")
	fs.StringVar(&f.caFile, "tls-ca-file", "", "PEM roots to trust instead of the system's (a file on the herald node)")
	fs.StringVar(&f.certFile, "tls-cert-file", "", "client certificate (with --tls-key-file)")
	fs.StringVar(&f.keyFile, "tls-key-file", "", "client certificate's key")
	fs.StringVar(&f.serverName, "tls-server-name", "", "name to verify in the server certificate")
	fs.BoolVar(&f.insecureSkipVerify, "tls-insecure-skip-verify", false, "do not verify the server certificate (tests only)")
	if !create {
		fs.BoolVar(&f.noTLS, "no-tls", false, "remove the TLS settings")
	}
}

// body builds the request body from the flags given: on update a patch of
// the fields named (the tls object is replaced whole).
func (f *connFlags) body(fs *flag.FlagSet, create bool) (map[string]any, error) {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	b := map[string]any{}
	if create {
		if f.name == "" || f.typ == "" || f.url == "" {
			return nil, usagef("--name, --type and --url are required")
		}
		b["name"], b["type"] = f.name, f.typ
	}
	if set["url"] {
		b["url"] = f.url
	}
	switch {
	case set["all-tenants"] && set["tenants"]:
		return nil, usagef("--tenants and --all-tenants exclude each other")
	case set["all-tenants"] && f.allTenants:
		b["tenants"] = "all"
	case set["all-tenants"], set["tenants"]:
		b["tenants"] = splitList(f.tenants)
	}
	tls := map[string]any{}
	for flagName, field := range map[string]string{"tls-ca-file": "ca_file", "tls-cert-file": "cert_file",
		"tls-key-file": "key_file", "tls-server-name": "server_name"} {
		if set[flagName] {
			tls[field] = map[string]string{"ca_file": f.caFile, "cert_file": f.certFile, "key_file": f.keyFile, "server_name": f.serverName}[field]
		}
	}
	if set["tls-insecure-skip-verify"] {
		tls["insecure_skip_verify"] = f.insecureSkipVerify
	}
	switch {
	case set["no-tls"] && len(tls) > 0:
		return nil, usagef("--no-tls and --tls-* exclude each other")
	case set["no-tls"]:
		b["tls"] = nil
	case len(tls) > 0:
		b["tls"] = tls
	}
	return b, nil
}

func connectionCreate(fs *flag.FlagSet) action {
	var f connFlags
	f.register(fs, true)
	return func(ctx context.Context, c *cli, _ []string) error {
		body, err := f.body(fs, true)
		if err != nil {
			return err
		}
		in := client.ConnectionInput{Name: f.name, Type: f.typ, URL: f.url}
		if t, ok := body["tenants"]; ok {
			if t == "all" {
				in.Tenants.All = true
			} else {
				in.Tenants.List = t.([]string)
			}
		}
		if tls, ok := body["tls"].(map[string]any); ok {
			in.TLS = &client.ConnectionTLS{}
			in.TLS.CAFile, _ = tls["ca_file"].(string)
			in.TLS.CertFile, _ = tls["cert_file"].(string)
			in.TLS.KeyFile, _ = tls["key_file"].(string)
			in.TLS.ServerName, _ = tls["server_name"].(string)
			in.TLS.InsecureSkipVerify, _ = tls["insecure_skip_verify"].(bool)
		}
		conn, err := c.api.CreateConnection(ctx, in)
		if err != nil {
			return err
		}
		return c.showConnection(conn)
	}
}

func connectionList(fs *flag.FlagSet) action {
	limit := fs.Int("limit", 0, "list at most this many (0: all)")
	return func(ctx context.Context, c *cli, _ []string) error {
		return listPages(c, *limit, []string{"NAME", "TYPE", "URL", "TENANTS", "CREATED"},
			func(n int, cursor string) ([]client.Connection, *string, error) {
				res, err := c.api.ListConnections(ctx, n, cursor)
				if err != nil {
					return nil, nil, err
				}
				return res.Data, res.NextCursor, nil
			},
			func(conn *client.Connection) []any {
				return []any{conn.Name, conn.Type, conn.URL, tenantsText(conn.Tenants), conn.CreatedAt}
			})
	}
}

func tenantsText(t client.ConnectionTenants) string {
	switch {
	case t.All:
		return "all"
	case len(t.List) == 0:
		return "(untenanted subscriptions only)"
	}
	return strings.Join(t.List, ",")
}

func (c *cli) showConnection(conn *client.Connection) error {
	if c.json {
		return c.out(conn)
	}
	tw := c.table()
	row(tw, "name", conn.Name)
	row(tw, "type", conn.Type)
	row(tw, "url", conn.URL)
	row(tw, "tenants", tenantsText(conn.Tenants))
	if t := conn.TLS; t != nil {
		parts := []string{}
		for _, kv := range [][2]string{{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"key_file", t.KeyFile}, {"server_name", t.ServerName}} {
			if kv[1] != "" {
				parts = append(parts, kv[0]+"="+kv[1])
			}
		}
		if t.InsecureSkipVerify {
			parts = append(parts, "insecure_skip_verify")
		}
		row(tw, "tls", strings.Join(parts, " "))
	}
	row(tw, "created_at", conn.CreatedAt)
	row(tw, "updated_at", conn.UpdatedAt)
	return tw.Flush()
}

func connectionGet(_ *flag.FlagSet) action {
	return func(ctx context.Context, c *cli, args []string) error {
		conn, err := c.api.GetConnection(ctx, args[0])
		if err != nil {
			return err
		}
		return c.showConnection(conn)
	}
}

func connectionUpdate(fs *flag.FlagSet) action {
	var f connFlags
	f.register(fs, false)
	return func(ctx context.Context, c *cli, args []string) error {
		patch, err := f.body(fs, false)
		if err != nil {
			return err
		}
		if len(patch) == 0 {
			return usagef("nothing to change: give the fields to change as flags (herald connections update -h)")
		}
		conn, err := c.api.UpdateConnection(ctx, args[0], patch)
		if err != nil {
			return err
		}
		return c.showConnection(conn)
	}
}

func connectionDelete(_ *flag.FlagSet) action {
	return func(ctx context.Context, c *cli, args []string) error {
		if err := c.api.DeleteConnection(ctx, args[0]); err != nil {
			return err
		}
		if c.json {
			return c.out(map[string]any{"name": args[0], "deleted": true})
		}
		fmt.Fprintf(c.stdout, "deleted %s\n", args[0])
		return nil
	}
}
