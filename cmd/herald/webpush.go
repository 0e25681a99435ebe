package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/heraldhq/herald"
	webpushdest "github.com/heraldhq/herald/destination/webpush"
	"github.com/heraldhq/herald/httpapi"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// Web Push destinations: the VAPID key (one per installation, in the
// store), the publisher, and herald webpush rotate-vapid.

// storeVAPIDKeys returns the store's VAPID key source, or nil when the
// store keeps none (a test double).
func storeVAPIDKeys(s store.Store) *vapidKeys {
	vs, ok := s.(store.VAPIDStore)
	if !ok {
		return nil
	}
	return newVAPIDKeys(vs)
}

// webPushKeys is keys as httpapi.Config.WebPush: nil (no route) when the
// store keeps no key.
func webPushKeys(keys *vapidKeys) httpapi.WebPushKeys {
	if keys == nil {
		return nil
	}
	return keys
}

// ensureVAPID generates the VAPID key on the first start (nodes starting
// together agree on one) and re-seals it under the first encryption key.
// A key that cannot be read (sealed with a key not configured) does not
// stop herald: webpush deliveries then fail as secret_unreadable and GET
// /v1/webpush/vapid-public-key answers 503, both until the key is given
// back or rotated.
func ensureVAPID(ctx context.Context, keys *vapidKeys, logger *slog.Logger) {
	if keys == nil {
		return
	}
	k, err := keys.Ensure(ctx)
	if err != nil {
		logger.Error("the VAPID key of Web Push destinations is not available; webpush deliveries fail until it is (herald webpush rotate-vapid makes a new one)", "err", err)
		return
	}
	logger.Debug("VAPID key", "public_key", k.Public)
}

// newWebPushPublisher is the webpush destination type: sent through the
// webhook sender's guarded client, http:// endpoints only with --dev.
func newWebPushPublisher(c *config, s store.Store, sender *webhook.Sender) *webpushdest.Publisher {
	var keys webpushdest.KeySource = noVAPID{}
	if k := storeVAPIDKeys(s); k != nil {
		keys = k
	}
	return webpushdest.New(webpushdest.Config{Sender: sender, Keys: keys, Subject: c.VAPIDSubject, AllowHTTP: c.Dev})
}

type noVAPID struct{}

func (noVAPID) VAPIDKey(context.Context) (*webpushdest.VAPIDKey, error) {
	return nil, errors.New("the store keeps no VAPID key")
}

// validVAPIDSubject checks --vapid-subject: RFC 8292 §2.1 wants a contact,
// a mailto: or https: URI.
func validVAPIDSubject(s string) error {
	if strings.HasPrefix(s, "mailto:") && len(s) > len("mailto:") || strings.HasPrefix(s, "https://") && len(s) > len("https://") {
		return nil
	}
	return fmt.Errorf("--vapid-subject: %q is not a mailto: or https: contact (e.g. mailto:ops@example.com)", s)
}

// resealVAPID re-seals the stored VAPID private key under the first
// encryption key (herald secrets rotate-key), when one is stored.
func resealVAPID(ctx context.Context, s store.Store) error {
	vs, ok := s.(store.VAPIDStore)
	if !ok {
		return nil
	}
	if _, err := vs.VAPIDKeyGet(ctx); errors.Is(err, herald.ErrNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("error reading the VAPID key of Web Push destinations: %w", err)
	}
	// Ensure finds the key stored and re-seals it.
	if _, err := newVAPIDKeys(vs).Ensure(ctx); err != nil {
		return fmt.Errorf("error re-encrypting the VAPID key of Web Push destinations: %w", err)
	}
	return nil
}

func webpushUsage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  herald webpush rotate-vapid [flags]
      replace the VAPID key pair of Web Push destinations with a new one.
      Browsers subscribed with the old public key must subscribe again
      (their push services refuse messages signed with another key).
      Takes herald serve's store flags (--data-dir or --database-url,
      --encryption-key); nodes pick the new key up within a minute.
`)
}

// cmdWebPush runs herald webpush <command>.
func cmdWebPush(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		webpushUsage(stderr)
		return usagef("webpush: which command? rotate-vapid")
	}
	switch args[0] {
	case "rotate-vapid":
		return cmdRotateVAPID(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		webpushUsage(stdout)
		return flag.ErrHelp
	}
	webpushUsage(stderr)
	return usagef("webpush: unknown command %q", args[0])
}

func cmdRotateVAPID(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := &config{}
	fs := flag.NewFlagSet("herald webpush rotate-vapid", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.flags(fs)
	if err := c.load(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("webpush rotate-vapid takes no arguments, got %q", fs.Args())
	}
	if c.DatabaseURL == "" {
		// Opening would create an empty database in a mistyped directory.
		if _, err := os.Stat(filepath.Join(c.DataDir, "herald.db")); err != nil {
			return fmt.Errorf("no herald database in --data-dir %s (pass the serving node's --data-dir, or --database-url): %w", c.DataDir, err)
		}
	}
	// A serving herald holds the SQLite data directory's lock; SQLite's
	// own locking keeps this one short write and it apart.
	c.noLock = true
	s, err := openStore(ctx, c)
	if err != nil {
		return err
	}
	defer s.Close()
	keys := storeVAPIDKeys(s)
	if keys == nil {
		return errors.New("the store keeps no VAPID key")
	}
	k, err := keys.Rotate(ctx)
	if err != nil {
		return fmt.Errorf("error rotating the VAPID key: %w", err)
	}
	fmt.Fprintf(stdout, "new VAPID public key: %s\nbrowsers subscribed with the old key must subscribe again\n", k.Public)
	return nil
}
