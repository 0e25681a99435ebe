package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/heraldhq/herald/seal"
	"github.com/heraldhq/herald/store"
)

// Secrets at rest (docs/adr/0014-secrets-at-rest.md): herald serve's start
// check, the sealed push.keys file, and herald secrets generate-key /
// rotate-key.

// pushKeysAAD binds a sealed push.keys to its purpose.
const pushKeysAAD = "herald/push.keys"

// rotatePasses bounds rotate-key's passes over the table: a row written by
// a node still encrypting with an older key during one pass is caught by
// the next; a third pass that still finds some means such a node keeps
// writing them.
const rotatePasses = 3

// checkSecrets refuses to start when a stored secret cannot be decrypted
// with the configured keys (signing with it is impossible, and a delivery
// with no valid signature is worse than none), and says once that secrets
// are plain text when no key is configured.
func checkSecrets(ctx context.Context, c *config, s store.Store, logger *slog.Logger) error {
	warnKeyFileMode(c.EncryptionKeyFile, logger)
	keeper, ok := s.(store.SecretKeeper)
	if !ok {
		return nil
	}
	if err := store.CheckSecretKeys(ctx, keeper, c.keys); err != nil {
		return err
	}
	if c.keys == nil {
		logger.Warn("subscription secrets and broker connection URLs are stored in plain text; set --encryption-key or --encryption-key-file to encrypt them (herald secrets generate-key makes a key)")
		return nil
	}
	counts, err := keeper.SecretKeyCounts(ctx)
	if err != nil {
		return fmt.Errorf("error reading stored secrets: %w", err)
	}
	var other int64
	for id, n := range counts {
		if id != c.keys.PrimaryID() {
			other += n
		}
	}
	if other > 0 {
		logger.Info("subscription secrets are encrypted at rest; some are not under the first key yet (herald secrets rotate-key re-encrypts them)",
			"key", c.keys.PrimaryID(), "not_under_first_key", other)
	} else {
		logger.Info("subscription secrets are encrypted at rest", "key", c.keys.PrimaryID())
	}
	return nil
}

// openPushKeys returns the plain text of push.keys' content: opened when
// sealed, and sealed in place when it is plain text and a key is set.
func openPushKeys(c *config, path, text string, logger *slog.Logger) (string, error) {
	if seal.IsSealed(text) {
		plain, err := c.keys.Open(text, pushKeysAAD)
		if err != nil {
			return "", fmt.Errorf("error reading %s: %w (pass the --encryption-key it was encrypted with)", path, err)
		}
		return plain, nil
	}
	if c.keys != nil {
		sealed, err := c.keys.Seal(text, pushKeysAAD)
		if err != nil {
			return "", err
		}
		if err := writeFileAtomic(path, sealed+"\n"); err != nil {
			return "", err
		}
		logger.Info("encrypted the push crypto keys file", "path", path, "key", c.keys.PrimaryID())
	}
	return text, nil
}

// writeFileAtomic replaces path (mode 0600) so that a crash leaves the old
// or the new content, never a torn file.
func writeFileAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil { //nolint:gosec // G703: push.keys in the operator's --data-dir
		return fmt.Errorf("error writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("error replacing %s: %w", path, err)
	}
	return nil
}

func secretsUsage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  herald secrets generate-key            print a new encryption key (base64 of 32 random bytes)
  herald secrets rotate-key [flags]      re-encrypt every stored secret under the first --encryption-key

rotate-key takes serve's --database-url, --data-dir, --encryption-key and
--encryption-key-file (herald secrets rotate-key -h), and runs while herald
serves. Rotating a key:
  1. herald secrets generate-key                      → NEW
  2. restart every node with --encryption-key NEW,OLD (NEW encrypts, OLD still decrypts)
  3. herald secrets rotate-key --encryption-key NEW,OLD
  4. restart every node with --encryption-key NEW
`)
}

func cmdSecrets(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		secretsUsage(stderr)
		return usagef("secrets: which command? generate-key or rotate-key")
	}
	switch args[0] {
	case "generate-key":
		if len(args) > 1 {
			if args[1] == "-h" || args[1] == "--help" {
				secretsUsage(stdout)
				return flag.ErrHelp
			}
			return usagef("secrets generate-key takes no arguments, got %q", args[1:])
		}
		key, err := seal.GenerateKey()
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, key)
		return nil
	case "rotate-key":
		return cmdRotateKey(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		secretsUsage(stdout) // asked for: output
		return flag.ErrHelp
	}
	secretsUsage(stderr)
	return usagef("secrets: unknown command %q", args[0])
}

// cmdRotateKey re-encrypts, in batches of --batch rows per transaction,
// every stored secret not under the first key. Each batch commits on its
// own and every row is readable before and after its rewrite, so an
// interrupted run leaves a working database and running it again
// continues (rows already under the first key are skipped).
func cmdRotateKey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := &config{}
	fs := flag.NewFlagSet("herald secrets rotate-key", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.flags(fs)
	batch := fs.Int("batch", store.DefaultResealBatch, "secret rows per transaction (1 to 10000)")
	if err := c.load(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("secrets rotate-key takes no arguments, got %q", fs.Args())
	}
	if c.keys == nil {
		return usagef("secrets rotate-key: --encryption-key or --encryption-key-file is required (the new key first, then the old ones)")
	}
	if *batch < 1 || *batch > 10_000 {
		return usagef("secrets rotate-key: --batch must be 1 to 10000, got %d", *batch)
	}
	if c.DatabaseURL == "" {
		// Opening would create an empty database in a mistyped directory.
		if _, err := os.Stat(filepath.Join(c.DataDir, "herald.db")); err != nil {
			return fmt.Errorf("no herald database in --data-dir %s (pass the serving node's --data-dir, or --database-url): %w", c.DataDir, err)
		}
	}
	// A serving herald holds the SQLite data directory's lock; SQLite's
	// own locking keeps this short-transaction writer and it apart.
	c.noLock = true
	s, err := openStore(ctx, c)
	if err != nil {
		return err
	}
	defer s.Close()
	keeper, ok := s.(store.SecretKeeper)
	if !ok {
		return errors.New("the store does not support encrypted secrets")
	}
	if err := store.CheckSecretKeys(ctx, keeper, c.keys); err != nil {
		return err
	}
	primary := c.keys.PrimaryID()
	// unreadable are rows no configured key opens (altered in the
	// database): left as they are, reported at the end.
	unreadable := map[store.SecretRow]bool{}
	// Connection URLs (few, one transaction) are re-sealed first in each
	// pass; SecretKeyCounts counts them with the secrets.
	unreadableConns := map[string]bool{}
	for pass := 1; ; pass++ {
		cres, err := keeper.ConnectionReseal(ctx)
		if err != nil {
			return fmt.Errorf("error re-encrypting connection URLs: %w", err)
		}
		for _, name := range cres.Unreadable {
			unreadableConns[name] = true
		}
		if cres.Resealed > 0 {
			fmt.Fprintf(stdout, "pass %d: re-encrypted %d connection URLs with key %s\n", pass, cres.Resealed, primary)
		}
		counts, err := keeper.SecretKeyCounts(ctx)
		if err != nil {
			return fmt.Errorf("error counting secrets: %w", err)
		}
		var total int64
		for _, n := range counts {
			total += n
		}
		todo := total - counts[primary] - int64(len(unreadable)) - int64(len(unreadableConns))
		if todo <= 0 {
			if len(unreadable) == 0 {
				fmt.Fprintf(stdout, "all %d stored secrets are encrypted with key %s\n", total, primary)
			}
			break
		}
		if pass > rotatePasses {
			return fmt.Errorf("%d secrets are still not encrypted with key %s after %d passes: a node whose first key is another one keeps writing them; restart every node with --encryption-key %s first, then run herald secrets rotate-key again",
				todo, primary, rotatePasses, primary)
		}
		fmt.Fprintf(stdout, "pass %d: re-encrypting %d of %d stored secrets with key %s, %d rows per transaction\n",
			pass, todo, total, primary, *batch)
		var after int64
		var scanned, resealed, raced int
		for {
			res, err := keeper.SecretReseal(ctx, &store.SecretResealParams{After: after, Limit: *batch})
			if err != nil {
				return fmt.Errorf("error re-encrypting (after row %d; run again to continue): %w", after, err)
			}
			after = res.Next
			scanned, resealed, raced = scanned+res.Scanned, resealed+res.Resealed, raced+res.Raced
			for _, r := range res.Unreadable {
				unreadable[r] = true
			}
			if res.Scanned > 0 {
				fmt.Fprintf(stdout, "  %d rows scanned, %d re-encrypted", scanned, resealed)
				if raced > 0 {
					fmt.Fprintf(stdout, ", %d changed meanwhile (retried next pass)", raced)
				}
				fmt.Fprintln(stdout)
			}
			if res.Done {
				break
			}
		}
	}
	if err := rotatePushKeys(c, stdout); err != nil {
		return err
	}
	if err := resealVAPID(ctx, s); err != nil {
		return err
	}
	if len(unreadable) > 0 {
		return unreadableError(unreadable, primary)
	}
	if len(unreadableConns) > 0 {
		return fmt.Errorf("every other secret is encrypted with key %s, but the URLs of connections %s could not be decrypted with any configured key: set them again with herald connections update NAME --url …",
			primary, strings.Join(slices.Sorted(maps.Keys(unreadableConns)), ", "))
	}
	fmt.Fprintf(stdout, "done: the keys after %s are no longer needed once every node runs with %s first\n", primary, primary)
	return nil
}

// unreadableError reports the secret rows no configured key could open:
// every other secret is under primary now, these stay as they were.
func unreadableError(rows map[store.SecretRow]bool, primary string) error {
	list := make([]string, 0, len(rows))
	for _, r := range slices.SortedFunc(maps.Keys(rows), func(a, b store.SecretRow) int { return cmp.Compare(a.ID, b.ID) }) {
		list = append(list, fmt.Sprintf("%s (row %d)", r.SubscriptionID, r.ID))
	}
	return fmt.Errorf("every other secret is encrypted with key %s, but %d stored secrets could not be decrypted with any configured key "+
		"(altered in the database?): %s. Their subscriptions' deliveries fail with secret_unreadable; give each a new secret "+
		"(herald subscriptions rotate-secret ID --grace-period-s 0) and the unreadable rows expire and are swept by retention",
		primary, len(list), strings.Join(list, ", "))
}

// rotatePushKeys re-seals <data-dir>/push.keys under the first key when it
// exists (herald serve seals a plain one itself when it reads it).
func rotatePushKeys(c *config, stdout io.Writer) error {
	if c.PushCryptoKeys != "" {
		return nil
	}
	path := filepath.Join(c.DataDir, "push.keys")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("error reading %s: %w", path, err)
	}
	text := strings.TrimSpace(string(b))
	if c.keys.Current(text) {
		return nil
	}
	plain, err := c.keys.Open(text, pushKeysAAD)
	if err != nil {
		return fmt.Errorf("error reading %s: %w", path, err)
	}
	sealed, err := c.keys.Seal(plain, pushKeysAAD)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(path, sealed+"\n"); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s is encrypted with key %s\n", path, c.keys.PrimaryID())
	return nil
}

// warnKeyFileMode warns when --encryption-key-file may be read or written
// by users other than its owner: its keys open every stored secret. It
// only warns (the operator may share it with a group on purpose), and says
// nothing on Windows, whose permission bits do not mean this.
func warnKeyFileMode(path string, logger *slog.Logger) {
	if path == "" || runtime.GOOS == "windows" {
		return
	}
	fi, err := os.Stat(path)
	if err != nil {
		return // keyRing already read it; a race here is not worth an error
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		logger.Warn("--encryption-key-file is accessible to other users than its owner; chmod 600 it",
			"path", path, "mode", fmt.Sprintf("%#o", perm))
	}
}
