package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/heraldhq/herald/client"
)

func eventCommands() []command {
	return []command{
		{group: "events", name: "publish", summary: "publish an event (--type, --data), or an NDJSON file of events through the batch API (--file)", setup: eventPublish},
		{group: "events", name: "get", args: "ID", nargs: 1, summary: "show an event and the deliveries it fanned out to", setup: eventGet},
		{group: "events", name: "list", summary: "search events, newest first", setup: eventList},
		{group: "events", name: "resend", args: "ID", nargs: 1, summary: "send an event again to one subscription (--subscription), as a new delivery", setup: eventResend},
	}
}

// Batch bounds of events publish --file: the API takes at most 1000
// events per call and a 16 MiB body by default; a batch is cut at 8 MiB
// so servers with the default limits never refuse one.
const (
	maxBatchEvents = 1000
	maxBatchBytes  = 8 << 20
)

func eventPublish(fs *flag.FlagSet) action {
	typ := fs.String("type", "", "event type, e.g. order.created")
	data := fs.String("data", "", "event data (JSON)")
	key := fs.String("key", "", "event key (ordering and supersession)")
	id := fs.String("id", "", "event id (idempotency key; default: the server makes one)")
	version := fs.Int64("version", 0, "event version (with ordering latest)")
	tenant := fs.String("tenant", "", "the event's tenant: it reaches only that tenant's subscriptions (a tenant token stamps its own)")
	file := fs.String("file", "", "publish every line of this NDJSON file (- for stdin), each a JSON event object, through POST /v1/events/batch")
	batch := fs.Int("batch-size", maxBatchEvents, "with --file: events per batch call (1 to 1000)")
	return func(ctx context.Context, c *cli, _ []string) error {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if *file != "" {
			for _, n := range []string{"type", "data", "key", "id", "version", "tenant"} {
				if set[n] {
					return usagef("--file and --%s exclude each other (the file's lines hold the events)", n)
				}
			}
			if *batch < 1 || *batch > maxBatchEvents {
				return usagef("--batch-size must be from 1 to %d", maxBatchEvents)
			}
			return c.publishFile(ctx, *file, *batch)
		}
		if *typ == "" {
			return usagef("--type is required (or --file)")
		}
		ev := client.EventInput{ID: *id, Type: *typ, Key: *key, Tenant: *tenant}
		if set["version"] {
			ev.Version = version
		}
		if *data != "" {
			raw, err := jsonArg("data", *data)
			if err != nil {
				return err
			}
			ev.Data = raw
		}
		res, err := c.api.Publish(ctx, ev)
		if err != nil {
			return err
		}
		if c.json {
			return c.out(res)
		}
		if res.Duplicate {
			// Deliveries is then the first publish's count (docs/api.md).
			fmt.Fprintf(c.stdout, "duplicate: %s was already published; nothing was sent (the first publish went to %d subscription(s))\n",
				res.ID, res.Deliveries)
			return nil
		}
		fmt.Fprintf(c.stdout, "published %s to %d subscription(s)\n", res.ID, res.Deliveries)
		return nil
	}
}

// publishFile streams an NDJSON file through the batch API. With --json
// it prints one result per event (index = line's position among the
// events); otherwise a summary and the rejected ones. Any rejection makes
// the command fail (exit 1) after the whole file was sent.
func (c *cli) publishFile(ctx context.Context, name string, batchSize int) error {
	var r io.Reader = c.stdin
	var total int64 // events in the file; 0 for stdin or a pipe
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return usagef("--file: %v", err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && c.stderrTTY {
			// The bar counts events, so a regular file is read once
			// beforehand to count them; a pipe shows a running count.
			total = countEvents(f)
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return fmt.Errorf("reading %s: %w", name, err)
			}
		}
		r = f
	}
	bar := c.newProgress("publishing events", total)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxBatchBytes)
	var (
		pending      []json.RawMessage
		pendingBytes int
		lines        []int // line number of each pending event
		index        int
		counts       = map[string]int{}
		rejected     []string
	)
	report := func(r client.BatchItemResult, line int) error {
		counts[r.Status]++
		if r.Status == "rejected" && r.Error != nil {
			// --json's index is the event's position in the file, so the
			// batch call's own index goes from the message there too.
			r.Error.Message = batchItemPrefix.ReplaceAllString(r.Error.Message, "")
			rejected = append(rejected, fmt.Sprintf("line %d: %s: %s", line, r.Error.Code, r.Error.Message))
		}
		if c.json {
			return c.out(r)
		}
		return nil
	}
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		res, err := c.api.PublishBatch(ctx, pending)
		if err != nil {
			return err
		}
		base := index
		for _, item := range res.Results {
			line := 0
			if item.Index >= 0 && item.Index < len(lines) {
				line = lines[item.Index]
			}
			item.Index += base
			if err := report(item, line); err != nil {
				return err
			}
		}
		index += len(pending)
		pending, pendingBytes, lines = pending[:0], 0, lines[:0]
		bar.set(int64(index), false)
		return nil
	}
	lineNo := 0
	for sc.Scan() {
		lineNo++
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		if !json.Valid(b) {
			// The batch call would refuse the whole body; reject this
			// line alone, as the API does for an invalid item.
			if err := flush(); err != nil {
				return err
			}
			item := client.BatchItemResult{Index: index, Status: "rejected",
				Error: &client.ErrorBody{Code: "invalid_json", Message: "line is not valid JSON"}}
			index++
			if err := report(item, lineNo); err != nil {
				return err
			}
			continue
		}
		if len(pending) > 0 && pendingBytes+len(b) > maxBatchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		pending = append(pending, json.RawMessage(append([]byte(nil), b...)))
		pendingBytes += len(b) + 1
		lines = append(lines, lineNo)
		if len(pending) >= batchSize {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	if err := flush(); err != nil {
		return err
	}
	bar.set(int64(index), true)
	bar.done()
	if !c.json {
		fmt.Fprintf(c.stdout, "%d events: %d accepted, %d duplicate, %d rejected\n", index,
			counts["accepted"], counts["duplicate"], counts["rejected"])
		for _, r := range rejected {
			fmt.Fprintln(c.stderr, r)
		}
	}
	if n := counts["rejected"]; n > 0 {
		return errors.New(fmt.Sprint(n, " of ", index, " events rejected"))
	}
	return nil
}

// batchItemPrefix is the batch API's "events[i]." naming an item by its
// index in one batch call; the human output names the file's line instead.
var batchItemPrefix = regexp.MustCompile(`^events\[\d+\]\.?`)

// countEvents counts the non-blank lines publishFile would send, for the
// progress bar's total; 0 when the file cannot be read through (the bar
// then shows a running count).
func countEvents(r io.Reader) int64 {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxBatchBytes)
	var n int64
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			n++
		}
	}
	if sc.Err() != nil {
		return 0
	}
	return n
}

func eventGet(fs *flag.FlagSet) action {
	return func(ctx context.Context, c *cli, args []string) error {
		ev, err := c.api.GetEvent(ctx, args[0])
		if err != nil {
			return err
		}
		if c.json {
			return c.out(ev)
		}
		tw := c.table()
		row(tw, "id", ev.ID)
		row(tw, "type", ev.Type)
		row(tw, "key", ev.Key)
		if ev.Version != nil {
			row(tw, "version", *ev.Version)
		}
		row(tw, "timestamp", ev.Timestamp)
		row(tw, "data", string(ev.Data))
		_ = tw.Flush()
		fmt.Fprintln(c.stdout)
		if len(ev.Deliveries) == 0 {
			fmt.Fprintln(c.stdout, "no deliveries: no subscription matched this event")
			return nil
		}
		tw = c.table("DELIVERY", "SUBSCRIPTION", "STATE", "TIER", "ATTEMPTS")
		for _, d := range ev.Deliveries {
			row(tw, d.ID, d.SubscriptionID, d.State, d.Tier, d.AttemptCount)
		}
		return tw.Flush()
	}
}

func eventList(fs *flag.FlagSet) action {
	typ := fs.String("type", "", "only event types matching this pattern, e.g. order.* (as a subscription's event types)")
	key := fs.String("key", "", "only this key (exact)")
	tenant := fs.String("tenant", "", "only this tenant's")
	since := fs.String("since", "", "only events at or after this time (RFC 3339, or a duration ago: 1h)")
	until := fs.String("until", "", "only events before this time")
	noSystem := fs.Bool("exclude-system", false, "leave out herald's own herald.* events (alerts)")
	limit := fs.Int("limit", 100, "list at most this many (0: all)")
	return func(ctx context.Context, c *cli, _ []string) error {
		p := client.EventListParams{Type: *typ, Key: *key, Tenant: *tenant, ExcludeSystem: *noSystem}
		var err error
		if p.Since, err = parseTime("since", *since); err != nil {
			return err
		}
		if p.Until, err = parseTime("until", *until); err != nil {
			return err
		}
		return listPages(c, *limit, []string{"ID", "TYPE", "KEY", "TIMESTAMP", "DATA"},
			func(n int, cursor string) ([]client.Event, *string, error) {
				p.Limit, p.Cursor = n, cursor
				res, err := c.api.ListEvents(ctx, p)
				if err != nil {
					return nil, nil, err
				}
				return res.Data, res.NextCursor, nil
			},
			func(ev *client.Event) []any {
				return []any{ev.ID, ev.Type, ev.Key, ev.Timestamp, ellipsis(string(ev.Data), 60)}
			})
	}
}

// ellipsis shortens s to n runes for a table cell.
func ellipsis(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
