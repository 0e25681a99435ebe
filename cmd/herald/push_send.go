package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald"
	webpushdest "github.com/heraldhq/herald/destination/webpush"
)

// herald push send: one Web Push message, encrypted (RFC 8291) and
// VAPID-signed (RFC 8292) with the webpush destination's own code, to any
// push service; it prints the service's answer. It exists so the README's
// Web Push flow can be followed without writing a sender.

// pushSendTimeout bounds the one request.
const pushSendTimeout = 30 * time.Second

func pushUsage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  herald push send ENDPOINT --p256dh KEY --auth SECRET [--vapid-key FILE | --from-store] [flags]
  herald push send --subscription @subscription.json [--vapid-key FILE | --from-store] [flags]
      encrypt --data for a browser's push subscription (aes128gcm) and
      send it to the subscription's endpoint (herald's own push service,
      FCM, Mozilla's, Apple's), signed with a VAPID key: the one in FILE
      (the base64url private key, as web-push generate-vapid-keys prints
      it), or herald's own (--from-store, with herald serve's store flags
      --data-dir or --database-url and --encryption-key), which is what
      the pages subscribed with /v1/webpush/vapid-public-key need. Prints
      the push service's status, headers and body; exits 1 unless 2xx.
`)
}

// cmdPush runs herald push <command>.
func cmdPush(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		pushUsage(stderr)
		return usagef("push: which command? send")
	}
	switch args[0] {
	case "send":
		return cmdPushSend(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		pushUsage(stdout)
		return flag.ErrHelp
	}
	pushUsage(stderr)
	return usagef("push: unknown command %q", args[0])
}

// pushSendShown are the flags herald push send -h lists.
var pushSendShown = map[string]bool{
	"p256dh": true, "auth": true, "subscription": true, "vapid-key": true, "from-store": true, "data": true,
	"ttl": true, "urgency": true, "topic": true, "vapid-subject": true,
	"config": true, "data-dir": true, "database-url": true, "encryption-key": true, "encryption-key-file": true,
}

type pushSendFlags struct {
	p256dh, auth, subscription string
	vapidKey                   string
	fromStore                  bool
	data                       string
	ttl                        int
	urgency, topic             string
}

func cmdPushSend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := &config{}
	f := &pushSendFlags{}
	fs := flag.NewFlagSet("herald push send", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The flags of this command and the store's, not every serve flag
	// (which c.flags defines for --from-store and --config).
	fs.Usage = func() {
		w := fs.Output()
		pushUsage(w)
		fmt.Fprintln(w, "\nFlags:")
		fs.VisitAll(func(fl *flag.Flag) {
			if pushSendShown[fl.Name] {
				def := ""
				if fl.DefValue != "" && fl.DefValue != "false" {
					def = " (default " + fl.DefValue + ")"
				}
				fmt.Fprintf(w, "  --%s\n    \t%s%s\n", fl.Name, fl.Usage, def)
			}
		})
	}
	c.flags(fs)
	fs.StringVar(&f.p256dh, "p256dh", "", "the subscription's keys.p256dh (base64url)")
	fs.StringVar(&f.auth, "auth", "", "the subscription's keys.auth (base64url)")
	fs.StringVar(&f.subscription, "subscription", "", "the browser's PushSubscription.toJSON(), or @file with it (instead of ENDPOINT, --p256dh and --auth)")
	fs.StringVar(&f.vapidKey, "vapid-key", "", "file with the VAPID private key (base64url, 32 bytes) to sign with")
	fs.BoolVar(&f.fromStore, "from-store", false, "sign with herald's own VAPID key, read from the store (--data-dir or --database-url, --encryption-key)")
	fs.StringVar(&f.data, "data", "hello from herald", "the message (at most 3,993 bytes), or @file with it")
	fs.IntVar(&f.ttl, "ttl", 60, "TTL header: seconds the push service keeps the message for a browser that is away")
	fs.StringVar(&f.urgency, "urgency", "normal", "Urgency header: very-low, low, normal or high")
	fs.StringVar(&f.topic, "topic", "", "Topic header (a newer message of the topic replaces an undelivered one)")
	// The endpoint may come before the flags (the flag package stops at
	// the first positional argument).
	var endpoint string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		endpoint, args = args[0], args[1:]
	}
	if err := c.load(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		if endpoint != "" || fs.NArg() > 1 {
			return usagef("push send takes one ENDPOINT, got %q", append([]string{endpoint}, fs.Args()...))
		}
		endpoint = fs.Arg(0)
	}
	sub, err := f.target(endpoint)
	if err != nil {
		return err
	}
	if f.vapidKey != "" && f.fromStore {
		return usagef("push send: --vapid-key and --from-store are exclusive")
	}
	if f.ttl < 0 {
		return usagef("push send: --ttl must not be negative")
	}
	payload, err := readArg(f.data)
	if err != nil {
		return err
	}
	var vk *webpushdest.VAPIDKey
	switch {
	case f.vapidKey != "":
		b, err := os.ReadFile(f.vapidKey)
		if err != nil {
			return fmt.Errorf("error reading --vapid-key: %w", err)
		}
		if vk, err = webpushdest.ParseVAPIDKey(strings.TrimSpace(string(b)), ""); err != nil {
			return fmt.Errorf("--vapid-key %s: %w", f.vapidKey, err)
		}
	case f.fromStore:
		if vk, err = storeVAPIDKey(ctx, c); err != nil {
			return err
		}
	}
	return pushSendOne(ctx, pushMessage{sub: sub, payload: []byte(payload), vapid: vk, subject: c.VAPIDSubject,
		ttl: f.ttl, urgency: f.urgency, topic: f.topic}, stdout)
}

// target is the subscription from --subscription, or ENDPOINT with
// --p256dh and --auth.
func (f *pushSendFlags) target(endpoint string) (herald.PushSubscription, error) {
	var sub herald.PushSubscription
	if f.subscription != "" {
		if endpoint != "" || f.p256dh != "" || f.auth != "" {
			return sub, usagef("push send: --subscription replaces ENDPOINT, --p256dh and --auth")
		}
		raw, err := readArg(f.subscription)
		if err != nil {
			return sub, err
		}
		if err := json.Unmarshal([]byte(raw), &sub); err != nil {
			return sub, fmt.Errorf("--subscription is not a PushSubscription JSON: %w", err)
		}
	} else {
		sub.Endpoint, sub.Keys.P256DH, sub.Keys.Auth = endpoint, f.p256dh, f.auth
	}
	if sub.Endpoint == "" || sub.Keys.P256DH == "" || sub.Keys.Auth == "" {
		return sub, usagef("push send: give ENDPOINT, --p256dh and --auth (or --subscription)")
	}
	return sub, nil
}

// readArg is s, or the content of the file @s names.
func readArg(s string) (string, error) {
	name, ok := strings.CutPrefix(s, "@")
	if !ok {
		return s, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("error reading %s: %w", name, err)
	}
	return string(b), nil
}

// storeVAPIDKey reads herald's VAPID key as herald webpush rotate-vapid
// opens the store: beside a serving node, creating nothing.
func storeVAPIDKey(ctx context.Context, c *config) (*webpushdest.VAPIDKey, error) {
	if c.DatabaseURL == "" {
		if _, err := os.Stat(filepath.Join(c.DataDir, "herald.db")); err != nil {
			return nil, fmt.Errorf("no herald database in --data-dir %s (pass the serving node's --data-dir, or --database-url): %w", c.DataDir, err)
		}
	}
	c.noLock = true
	s, err := openStore(ctx, c)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	keys := storeVAPIDKeys(s)
	if keys == nil {
		return nil, errors.New("the store keeps no VAPID key")
	}
	k, err := keys.VAPIDKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("error reading herald's VAPID key: %w", err)
	}
	return k, nil
}

type pushMessage struct {
	sub     herald.PushSubscription
	payload []byte
	vapid   *webpushdest.VAPIDKey // nil: unsigned
	subject string
	ttl     int
	urgency string
	topic   string
}

// pushSendOne encrypts, signs and sends m, then prints the answer.
func pushSendOne(ctx context.Context, m pushMessage, stdout io.Writer) error {
	keys, err := webpushdest.ParseKeys(m.sub.Keys.P256DH, m.sub.Keys.Auth)
	if err != nil {
		return err
	}
	body, err := webpushdest.Encrypt(keys, m.payload)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, pushSendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.sub.Endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("endpoint: %w", err)
	}
	h := req.Header
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Encoding", "aes128gcm")
	h.Set("TTL", strconv.Itoa(m.ttl))
	h.Set("Urgency", m.urgency)
	if m.topic != "" {
		h.Set("Topic", m.topic)
	}
	if m.vapid != nil {
		origin, err := webpushdest.Origin(m.sub.Endpoint)
		if err != nil {
			return err
		}
		// 12 h: well inside RFC 8292's 24 h cap, whatever the clocks.
		jwt, err := m.vapid.SignJWT(origin, m.subject, time.Now().Add(12*time.Hour))
		if err != nil {
			return err
		}
		h.Set("Authorization", "vapid t="+jwt+", k="+m.vapid.Public)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("error sending to %s: %w", m.sub.Endpoint, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	fmt.Fprintln(stdout, resp.Proto, resp.Status)
	names := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range resp.Header[k] {
			fmt.Fprintf(stdout, "%s: %s\n", k, v)
		}
	}
	if len(answer) > 0 {
		fmt.Fprintf(stdout, "\n%s\n", bytes.TrimRight(answer, "\n"))
	}
	if resp.StatusCode/100 != 2 {
		msg := "the push service refused the message"
		if resp.StatusCode == http.StatusUnauthorized && m.vapid == nil {
			msg += " (401: the subscription was made with a VAPID key; sign with --vapid-key or --from-store)"
		}
		return errors.New(msg)
	}
	return nil
}
