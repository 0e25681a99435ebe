package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/heraldhq/herald/client"
)

func tokenCommands() []command {
	return []command{
		{group: "tokens", name: "create", summary: "create a scoped API token (admin); prints it once", setup: tokenCreate},
		{group: "tokens", name: "list", summary: "list API tokens (never the tokens themselves)", setup: tokenList},
		{group: "tokens", name: "revoke", args: "ID", nargs: 1, summary: "revoke an API token: it stops working at its next request", setup: tokenRevoke},
	}
}

// tokenScopes is the help text listing the scopes.
const tokenScopes = "events:publish, events:read, subscriptions:read, subscriptions:write, deliveries:read, deliveries:write, admin"

func tokenCreate(fs *flag.FlagSet) action {
	name := fs.String("name", "", "what the token is for (required)")
	scopes := fs.String("scopes", "", "comma-separated scopes (required): "+tokenScopes)
	tenant := fs.String("tenant", "", "confine the token to this tenant's data (not with admin)")
	expires := fs.String("expires", "", "when the token stops working: RFC 3339 time, or a duration from now (720h)")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *name == "" || *scopes == "" {
			return usagef("--name and --scopes are required")
		}
		in := client.TokenInput{Name: *name, Scopes: splitList(*scopes), Tenant: *tenant}
		if *expires != "" {
			if d, err := time.ParseDuration(*expires); err == nil {
				in.ExpiresAt = time.Now().Add(d)
			} else if at, err := time.Parse(time.RFC3339Nano, *expires); err == nil {
				in.ExpiresAt = at
			} else {
				return usagef("--expires: %q is neither an RFC 3339 time nor a duration", *expires)
			}
		}
		tok, err := c.api.CreateToken(ctx, in)
		if err != nil {
			return err
		}
		if c.json {
			return c.out(tok)
		}
		fmt.Fprintln(c.stdout, tok.Token)
		fmt.Fprintf(c.stderr, "token %s (%s): scopes %s%s%s\nThe token is shown only now; revoke it with: herald tokens revoke %s\n",
			tok.ID, tok.Name, strings.Join(tok.Scopes, ","), tenantText(tok.Tenant), expiryText(tok.ExpiresAt), tok.ID)
		return nil
	}
}

func tenantText(t *string) string {
	if t == nil {
		return ""
	}
	return ", tenant " + *t
}

func expiryText(t *string) string {
	if t == nil {
		return ""
	}
	return ", expires " + *t
}

func tokenList(_ *flag.FlagSet) action {
	return func(ctx context.Context, c *cli, _ []string) error {
		res, err := c.api.ListTokens(ctx)
		if err != nil {
			return err
		}
		tw := c.table("ID", "NAME", "SCOPES", "TENANT", "EXPIRES", "CREATED")
		for i := range res.Data {
			t := &res.Data[i]
			if c.json {
				if err := c.out(t); err != nil {
					return err
				}
				continue
			}
			tenant, exp := "", ""
			if t.Tenant != nil {
				tenant = *t.Tenant
			}
			if t.ExpiresAt != nil {
				exp = *t.ExpiresAt
			}
			row(tw, t.ID, t.Name, strings.Join(t.Scopes, ","), tenant, exp, t.CreatedAt)
		}
		if !c.json {
			return tw.Flush()
		}
		return nil
	}
}

func tokenRevoke(_ *flag.FlagSet) action {
	return func(ctx context.Context, c *cli, args []string) error {
		if err := c.api.RevokeToken(ctx, args[0]); err != nil {
			return err
		}
		if !c.json {
			fmt.Fprintf(c.stdout, "revoked %s\n", args[0])
		}
		return nil
	}
}
