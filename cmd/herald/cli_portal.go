package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/heraldhq/herald/client"
)

func portalCommands() []command {
	return []command{
		{group: "portal", name: "create", summary: "make a one-time link opening the consumer portal for a tenant (admin); prints the URL", setup: portalCreate},
	}
}

// logoTypes are the image types a portal logo may have, by extension.
var logoTypes = map[string]string{
	".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
}

func portalCreate(fs *flag.FlagSet) action {
	tenant := fs.String("tenant", "", "the tenant the portal shows (required)")
	ttl := fs.Duration("ttl", 0, "how long the link (and the session it opens) lasts, whole seconds, at most 24h (default 1h)")
	name := fs.String("name", "", "your product's name, shown in the portal's header")
	accent := fs.String("accent", "", "accent colour #rrggbb")
	logo := fs.String("logo", "", "logo image file (PNG, SVG, JPEG or WebP, at most 64 KiB)")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *tenant == "" {
			return usagef("--tenant is required")
		}
		if *ttl < 0 || *ttl%time.Second != 0 {
			return usagef("--ttl must be a positive number of whole seconds, got %s", *ttl)
		}
		in := client.PortalLinkInput{TTL: *ttl}
		th := client.PortalTheme{Name: *name, Accent: *accent}
		if *logo != "" {
			b, err := os.ReadFile(*logo)
			if err != nil {
				return fmt.Errorf("--logo: %w", err)
			}
			mt := logoTypes[strings.ToLower(filepath.Ext(*logo))]
			if mt == "" {
				// No known extension: trust the content, if it is an image.
				if mt = http.DetectContentType(b); !strings.HasPrefix(mt, "image/") {
					return usagef("--logo: %s is not a PNG, SVG, JPEG or WebP image", *logo)
				}
				mt, _, _ = strings.Cut(mt, ";")
			}
			th.Logo = "data:" + mt + ";base64," + base64.StdEncoding.EncodeToString(b)
		}
		if th != (client.PortalTheme{}) {
			in.Theme = &th
		}
		link, err := c.api.CreatePortalLink(ctx, *tenant, in)
		if err != nil {
			return err
		}
		if c.json {
			return c.out(link)
		}
		fmt.Fprintln(c.stdout, link.URL)
		fmt.Fprintf(c.stderr, "portal link for tenant %s: works once, until %s\n", *tenant, link.ExpiresAt)
		return nil
	}
}
