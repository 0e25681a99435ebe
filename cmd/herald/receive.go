package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/webhook"
)

// cmdReceive runs a local webhook receiver for trying herald out: it prints
// every request, verifies Standard Webhooks signatures when given the
// subscription's secret(s), and can fail a share of requests on purpose to
// watch retries and dead letters.
func cmdReceive(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("herald receive", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9000", "address to listen on")
	secrets := fs.String("secret", "", "comma-separated whsec_ secrets to verify signatures with (optional)")
	status := fs.Int("status", 200, "status to answer with")
	failRatio := fs.Float64("fail-ratio", 0, "share of requests (0..1) answered 500 instead")
	quiet := fs.Bool("quiet", false, "print one line per request, without the body")
	if err := parseFlags(fs, args, os.Stdout); err != nil {
		return err
	}
	var keys []string
	for _, s := range strings.Split(*secrets, ",") {
		if s = strings.TrimSpace(s); s != "" {
			if err := webhook.ValidSecret(s); err != nil {
				return fmt.Errorf("--secret: %w", err)
			}
			keys = append(keys, s)
		}
	}
	var n atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 10<<20))
		i := n.Add(1)
		verdict := "signature not checked: no --secret"
		if len(keys) > 0 {
			if err := webhook.Verify(keys, r.Header, body, time.Now(), 5*time.Minute); err != nil {
				verdict = "SIGNATURE INVALID: " + err.Error()
			} else {
				verdict = "signature ok"
			}
		}
		code := *status
		if *failRatio > 0 && rand.Float64() < *failRatio {
			code = http.StatusInternalServerError
		}
		fmt.Printf("#%d %s %s id=%s attempt=%s type=%s -> %d (%s)\n", i, r.Method, r.URL.Path,
			r.Header.Get("webhook-id"), r.Header.Get("herald-attempt"), r.Header.Get("herald-event-type"), code, verdict)
		if !*quiet {
			fmt.Printf("   %s\n", body)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, "{\"status\":%d}\n", code)
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "herald receive: listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
