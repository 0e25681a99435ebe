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
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/heraldhq/herald/client"
)

// herald listen: a developer's receiver behind NAT gets a listen
// subscription's deliveries (ADR 0024). The CLI holds the WebSocket of
// GET /v1/subscriptions/{id}/listen, forwards each request to --forward
// and answers with what the local receiver said, which herald records as
// the attempt's result.

func listenCommands() []command {
	return []command{
		{group: "listen", summary: "receive a listen subscription's deliveries and forward them to a local URL (--event-types: a temporary subscription, deleted on exit)", setup: listenCmd},
	}
}

// Reconnect backoff of herald listen: doubling from listenBackoffMin to
// listenBackoffMax; a session that lasted listenBackoffReset resets it.
const (
	listenBackoffMin   = 500 * time.Millisecond
	listenBackoffMax   = 30 * time.Second
	listenBackoffReset = time.Minute
	// listenReadLimit is how much of a local answer's body is read (as the
	// webhook sender reads; herald keeps the first 1 KiB).
	listenReadLimit = 64 << 10
)

func listenCmd(fs *flag.FlagSet) action {
	sub := fs.String("subscription", "", "the listen subscription to receive (destination type listen)")
	forward := fs.String("forward", "", "local URL each delivery is sent to, e.g. http://localhost:3000/hook (required)")
	types := fs.String("event-types", "", "without --subscription: create a temporary listen subscription of these comma-separated event type patterns, deleted on exit")
	tenant := fs.String("tenant", "", "with --event-types: the temporary subscription's tenant")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *forward == "" {
			return usagef("--forward is required: the local URL deliveries are sent to")
		}
		fu, err := url.Parse(*forward)
		if err != nil || (fu.Scheme != "http" && fu.Scheme != "https") || fu.Host == "" {
			return usagef("--forward %q is not an http(s) URL such as http://localhost:3000/hook", *forward)
		}
		switch {
		case *sub != "" && *types != "":
			return usagef("give --subscription or --event-types, not both")
		case *sub == "" && *types == "":
			return usagef("give --subscription ID (a listen subscription) or --event-types PATTERNS (a temporary one)")
		}
		id := *sub
		if id == "" {
			created, err := createTempListen(ctx, c, splitList(*types), *tenant)
			if err != nil {
				return err
			}
			id = created
			defer deleteTempListen(c, id)
			fmt.Fprintf(c.stderr, "created temporary subscription %s (deleted when herald listen exits)\n", id)
		}
		return listenLoop(ctx, c, id, fu.String())
	}
}

// createTempListen creates the temporary listen subscription of
// --event-types and returns its id.
func createTempListen(ctx context.Context, c *cli, types []string, tenant string) (string, error) {
	host, _ := os.Hostname()
	body := map[string]any{
		"destination": map[string]any{"type": "listen"},
		"event_types": types,
		"description": fmt.Sprintf("temporary: herald listen on %s (pid %d); deleted when it exits", host, os.Getpid()),
	}
	if tenant != "" {
		body["tenant"] = tenant
	}
	s, err := c.api.CreateSubscription(ctx, body)
	if err != nil {
		return "", err
	}
	return s.ID, nil
}

// deleteTempListen deletes the temporary subscription on the way out,
// with a context of its own: the command's ended with the signal.
func deleteTempListen(c *cli, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.api.DeleteSubscription(ctx, id); err != nil && !errors.Is(err, client.ErrNotFound) {
		fmt.Fprintf(c.stderr, "could not delete temporary subscription %s: %v (delete it with: herald subscriptions delete %s)\n", id, err, id)
		return
	}
	fmt.Fprintf(c.stderr, "deleted temporary subscription %s\n", id)
}

// listenLoop connects, serves, and reconnects with backoff until ctx ends
// (nil: Ctrl-C is how listen stops) or the server refuses (the error).
func listenLoop(ctx context.Context, c *cli, id, forward string) error {
	hc := &http.Client{
		// Redirects are not followed, as herald does not follow them.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	backoff := listenBackoffMin
	for {
		sess, err := c.api.Listen(ctx, id)
		if ctx.Err() != nil {
			return nil
		}
		var ce *client.ConnError
		switch {
		case errors.As(err, &ce):
			fmt.Fprintf(c.stderr, "%v; retrying in %s\n", err, backoff.Round(time.Millisecond))
		case err != nil:
			return err
		default:
			fmt.Fprintf(c.stderr, "listening: subscription %s → %s (Ctrl-C to stop)\n", id, forward)
			started := time.Now()
			err = sess.Serve(ctx, func(rctx context.Context, r *client.ListenRequest) *client.ListenResponse {
				return forwardOne(rctx, c, hc, forward, r)
			})
			if ctx.Err() != nil {
				return nil
			}
			var closed *client.ListenClosedError
			if errors.As(err, &closed) && closed.Code == client.ListenCloseReplaced {
				return fmt.Errorf("another listener connected to subscription %s and took over; this one stops", id)
			}
			if errors.As(err, &closed) && closed.Code == client.ListenCloseGone {
				return fmt.Errorf("subscription %s was deleted or is no longer a listen destination", id)
			}
			if time.Since(started) > listenBackoffReset {
				backoff = listenBackoffMin
			}
			fmt.Fprintf(c.stderr, "connection lost (%v); reconnecting in %s\n", err, backoff.Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, listenBackoffMax)
	}
}

// forwardOne sends r to forward and reports the answer, printing one line.
func forwardOne(ctx context.Context, c *cli, hc *http.Client, forward string, r *client.ListenRequest) *client.ListenResponse {
	start := time.Now()
	res := doForward(ctx, hc, forward, r)
	elapsed := time.Since(start)
	if c.json {
		line := map[string]any{"time": start.UTC().Format(time.RFC3339Nano), "event_type": r.EventType, "event_id": r.EventID,
			"delivery_id": r.DeliveryID, "attempt": r.Attempt, "status": res.Status, "error": res.Error, "latency_ms": elapsed.Milliseconds()}
		b, _ := json.Marshal(line)
		fmt.Fprintln(c.stdout, string(b))
		return res
	}
	outcome := fmt.Sprint(res.Status)
	if res.Error != "" {
		outcome = "error: " + res.Error
	}
	fmt.Fprintf(c.stdout, "%s  %s  %s  attempt %d  → %s  %s\n", start.Format("15:04:05"), r.EventType, r.EventID,
		r.Attempt, outcome, elapsed.Round(time.Millisecond))
	return res
}

func doForward(ctx context.Context, hc *http.Client, forward string, r *client.ListenRequest) *client.ListenResponse {
	method := r.Method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, forward, bytes.NewReader(r.Body))
	if err != nil {
		return &client.ListenResponse{Error: "cannot build the request: " + err.Error()}
	}
	for name, v := range r.Headers {
		switch strings.ToLower(name) {
		case "content-length", "host":
			continue // net/http sets them for the local request
		}
		req.Header.Set(name, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return &client.ListenResponse{Error: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, listenReadLimit))
	h := map[string]string{}
	for name := range resp.Header {
		h[name] = resp.Header.Get(name)
	}
	return &client.ListenResponse{Status: resp.StatusCode, Headers: h, Body: string(b)}
}
