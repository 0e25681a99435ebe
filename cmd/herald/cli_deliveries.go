package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/heraldhq/herald/client"
)

func deliveryCommands() []command {
	return []command{
		{group: "deliveries", name: "list", summary: "list deliveries, newest first", setup: deliveryList},
		{group: "deliveries", name: "get", args: "ID", nargs: 1, summary: "show a delivery, its attempts and what a pending one waits for", setup: deliveryGet},
		{group: "deliveries", name: "retry", args: "ID", nargs: 1, summary: "send a finished delivery again", setup: deliveryRetry},
		{group: "dead-letters", name: "list", summary: "count dead letters by subscription and error class", setup: deadLetterList},
		{group: "dead-letters", name: "redrive", summary: "send a subscription's dead letters again (asks first; --yes in scripts)", setup: deadLetterRedrive},
		{group: "tail", summary: "follow deliveries and their outcomes as they happen, until interrupted", setup: tailCmd},
	}
}

const deliveryStates = "pending, in_flight, delivered, dead, skipped, superseded, cancelled"

func deliveryList(fs *flag.FlagSet) action {
	sub := fs.String("subscription-id", "", "only this subscription's")
	ev := fs.String("event-id", "", "only this event's")
	state := fs.String("state", "", "only this state: "+deliveryStates)
	tenant := fs.String("tenant", "", "only deliveries of this tenant's subscriptions")
	since := fs.String("since", "", "only deliveries created at or after this time (RFC 3339, or a duration ago: 1h)")
	until := fs.String("until", "", "only deliveries created before this time")
	limit := fs.Int("limit", 100, "list at most this many (0: all)")
	return func(ctx context.Context, c *cli, _ []string) error {
		p := client.DeliveryListParams{SubscriptionID: *sub, EventID: *ev, State: *state, Tenant: *tenant}
		var err error
		if p.Since, err = parseTime("since", *since); err != nil {
			return err
		}
		if p.Until, err = parseTime("until", *until); err != nil {
			return err
		}
		return listPages(c, *limit, []string{"ID", "EVENT", "SUBSCRIPTION", "STATE", "TIER", "ATTEMPTS", "LAST", "CREATED"},
			func(n int, cursor string) ([]client.Delivery, *string, error) {
				p.Limit, p.Cursor = n, cursor
				res, err := c.api.ListDeliveries(ctx, p)
				if err != nil {
					return nil, nil, err
				}
				return res.Data, res.NextCursor, nil
			},
			func(d *client.Delivery) []any {
				return []any{d.ID, d.EventID, d.SubscriptionID, d.State, d.Tier, d.AttemptCount, lastOutcome(d), d.CreatedAt}
			})
	}
}

// lastOutcome renders a delivery's last attempt: "200", "503 http_status",
// "timeout".
func lastOutcome(d *client.Delivery) string {
	switch {
	case d.LastStatus != 0 && d.LastError != "":
		return fmt.Sprintf("%d %s", d.LastStatus, d.LastError)
	case d.LastStatus != 0:
		return fmt.Sprint(d.LastStatus)
	}
	return d.LastError
}

func (c *cli) showDelivery(d *client.Delivery) error {
	if c.json {
		return c.out(d)
	}
	tw := c.table()
	row(tw, "id", d.ID)
	row(tw, "event", d.EventID)
	if d.EventType != "" {
		row(tw, "event_type", d.EventType)
	}
	row(tw, "subscription", d.SubscriptionID)
	row(tw, "state", d.State)
	row(tw, "tier", d.Tier)
	row(tw, "attempts", d.AttemptCount)
	if d.NextAttemptAt != nil {
		row(tw, "next_attempt_at", *d.NextAttemptAt)
	}
	if d.WaitingFor != nil {
		row(tw, "waiting_for", *d.WaitingFor)
	}
	if d.EventKey != "" {
		row(tw, "event_key", d.EventKey)
	}
	row(tw, "created_at", d.CreatedAt)
	row(tw, "updated_at", d.UpdatedAt)
	_ = tw.Flush()
	if d.Attempts == nil || len(*d.Attempts) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout)
	tw = c.table("#", "AT", "TIER", "STATUS", "ERROR", "DURATION", "RESPONSE")
	for _, a := range *d.Attempts {
		errText := a.Error
		if a.ErrorMessage != "" {
			errText += ": " + a.ErrorMessage
		}
		row(tw, a.N, a.At, a.Tier, a.Status, ellipsis(errText, 50), fmt.Sprintf("%dms", a.DurationMS), ellipsis(a.ResponseExcerpt, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	last := (*d.Attempts)[len(*d.Attempts)-1]
	switch {
	case last.RequestHeaders != nil:
		if err := c.headerBlock("last request headers (as sent):", last.RequestHeaders); err != nil {
			return err
		}
		if last.ResponseHeaders != nil {
			return c.headerBlock("last response headers:", last.ResponseHeaders)
		}
	case last.Request != nil:
		// Stored before herald kept headers: the API's rebuild.
		return c.headerBlock(fmt.Sprintf("last request, rebuilt from the subscription as it is now: %s %s",
			last.Request.Method, last.Request.URL), last.Request.Headers)
	}
	return nil
}

// headerBlock prints a title and one header a line.
func (c *cli) headerBlock(title string, headers map[string]string) error {
	fmt.Fprintf(c.stdout, "\n%s\n", title)
	tw := c.table()
	for _, k := range sortedKeys(headers) {
		row(tw, "  "+k+":", headers[k])
	}
	return tw.Flush()
}

func deliveryGet(fs *flag.FlagSet) action {
	return func(ctx context.Context, c *cli, args []string) error {
		d, err := c.api.GetDelivery(ctx, args[0])
		if err != nil {
			return err
		}
		return c.showDelivery(d)
	}
}

func deliveryRetry(fs *flag.FlagSet) action {
	return func(ctx context.Context, c *cli, args []string) error {
		d, err := c.api.RetryDelivery(ctx, args[0])
		if err != nil {
			return err
		}
		if c.json {
			return c.out(d)
		}
		fmt.Fprintf(c.stdout, "queued %s again (state %s)\n", d.ID, d.State)
		return nil
	}
}

func deadLetterList(fs *flag.FlagSet) action {
	sub := fs.String("subscription-id", "", "only this subscription's")
	return func(ctx context.Context, c *cli, _ []string) error {
		groups, err := c.api.DeadLetterGroups(ctx, *sub)
		if err != nil {
			return err
		}
		if c.json {
			for _, g := range groups {
				if err := c.out(g); err != nil {
					return err
				}
			}
			return nil
		}
		if len(groups) == 0 {
			fmt.Fprintln(c.stdout, "no dead letters")
			return nil
		}
		tw := c.table("SUBSCRIPTION", "ERROR", "COUNT", "OLDEST", "NEWEST")
		for _, g := range groups {
			row(tw, g.SubscriptionID, g.Error, g.Count, g.OldestAt, g.NewestAt)
		}
		return tw.Flush()
	}
}

// maxRedriveBatch is the API's limit per redrive call.
const maxRedriveBatch = 10000

func deadLetterRedrive(fs *flag.FlagSet) action {
	sub := fs.String("subscription-id", "", "the subscription whose dead letters to redrive (required)")
	since := fs.String("since", "", "only letters that died at or after this time (RFC 3339, or a duration ago: 1h)")
	until := fs.String("until", "", "only letters that died before this time")
	class := fs.String("error", "", "only letters whose last error is of this class (e.g. http_status, timeout)")
	batch := fs.Int("batch-size", 1000, "letters per redrive call (1 to 10000); progress is shown between calls")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	dry := fs.Bool("dry-run", false, "only count the letters that would be redriven")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *sub == "" {
			return usagef("--subscription-id is required")
		}
		if *batch < 1 || *batch > maxRedriveBatch {
			return usagef("--batch-size must be from 1 to %d", maxRedriveBatch)
		}
		p := client.RedriveParams{SubscriptionID: *sub, Error: *class, DryRun: true}
		var err error
		if p.Since, err = parseTime("since", *since); err != nil {
			return err
		}
		if p.Until, err = parseTime("until", *until); err != nil {
			return err
		}
		// A dry run first: the confirmation and the bar need the count.
		first, err := c.api.Redrive(ctx, p)
		if err != nil {
			return err
		}
		if *dry || first.Matched == 0 {
			if c.json {
				return c.out(first)
			}
			fmt.Fprintf(c.stdout, "%d dead letter(s) match\n", first.Matched)
			return nil
		}
		if !*yes {
			ok, err := c.confirm(fmt.Sprintf("Redrive %d dead letter(s) of %s?", first.Matched, *sub))
			if err != nil {
				return err
			}
			if !ok {
				return usagef("redrive not confirmed; nothing was changed")
			}
		}
		p.DryRun = false
		total := client.RedriveResult{Matched: first.Matched, Remaining: first.Matched}
		bar := c.newProgress("redriving", int64(first.Matched))
		// At most the count that was confirmed: with a receiver still
		// failing and short tiers, redriven letters can die again while
		// this runs, and chasing them would never end.
		for total.Remaining > 0 && total.Redriven < first.Matched {
			p.Limit = min(*batch, first.Matched-total.Redriven)
			res, err := c.api.Redrive(ctx, p)
			if err != nil {
				bar.done()
				return err
			}
			total.Redriven += res.Redriven
			total.Remaining = res.Remaining
			total.Matched = max(total.Matched, total.Redriven+total.Remaining)
			bar.set(int64(total.Redriven), false)
			if res.Redriven == 0 {
				break // nothing moved: another client is redriving them
			}
		}
		bar.set(int64(total.Redriven), true)
		bar.done()
		if c.json {
			return c.out(total)
		}
		fmt.Fprintf(c.stdout, "redrove %d of %d dead letter(s); %d remaining\n", total.Redriven, total.Matched, total.Remaining)
		if total.Remaining > 0 {
			fmt.Fprintf(c.stderr, "%d died (again) while this ran; run the redrive again to send them\n", total.Remaining)
		}
		return nil
	}
}

func tailCmd(fs *flag.FlagSet) action {
	sub := fs.String("subscription-id", "", "only this subscription's deliveries")
	state := fs.String("state", "", "only deliveries in this state: "+deliveryStates)
	since := fs.String("since", "", "also show deliveries created since this time (RFC 3339, or a duration ago: 10m); default: only new ones")
	interval := fs.Duration("interval", time.Second, "poll interval")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *interval < 10*time.Millisecond {
			return usagef("--interval must be at least 10ms")
		}
		start, err := parseTime("since", *since)
		if err != nil {
			return err
		}
		t := newTailer(c, client.DeliveryListParams{SubscriptionID: *sub, State: *state})
		if err := t.begin(ctx, start); err != nil {
			return err
		}
		// On stderr even with --json: stdout holds only deliveries.
		fmt.Fprintln(c.stderr, "following deliveries; Ctrl-C to stop")
		tick := time.NewTicker(*interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
			if err := t.poll(ctx); err != nil {
				return err
			}
		}
	}
}

// tailer follows GET /v1/deliveries. Each poll lists the window from the
// oldest delivery not yet final (or the newest one seen) onwards. A
// delivery whose state or attempt count changed is read in full (GET
// /v1/deliveries/{id}: its attempts and event type) and each attempt not
// yet shown gets its own line, so retries show even though a delivery
// stays pending between them and when several attempts fall between two
// polls; a state change without a new attempt (created, skipped,
// redriven…) gets one line too. That is one request per change: tail is
// for watching, not for bulk export. Bounds are the server's clock
// (created_at), never this machine's.
type tailer struct {
	c     *cli
	p     client.DeliveryListParams
	seen  map[string]tailSeen
	since time.Time
	// dests caches each subscription's destination line: looked up once.
	dests map[string]string
}

// tailSeen is what was last shown of a delivery.
type tailSeen struct {
	state    string
	attempts int
}

// tailPages bounds one poll (10 × 1000 deliveries): a burst larger than
// that is shown partly, newest first.
const tailPages = 10

func newTailer(c *cli, p client.DeliveryListParams) *tailer {
	return &tailer{c: c, p: p, seen: map[string]tailSeen{}, dests: map[string]string{}}
}

// begin sets the window: from start when given (its deliveries are
// printed), otherwise from the newest existing delivery (not printed).
func (t *tailer) begin(ctx context.Context, start time.Time) error {
	if !start.IsZero() {
		t.since = start
		return t.poll(ctx)
	}
	p := t.p
	p.Limit = 1
	res, err := t.c.api.ListDeliveries(ctx, p)
	if err != nil {
		return err
	}
	if len(res.Data) == 0 {
		return nil
	}
	t.since, _ = time.Parse(time.RFC3339Nano, res.Data[0].CreatedAt)
	list, err := t.list(ctx)
	if err != nil {
		return err
	}
	for _, d := range list {
		t.seen[d.ID] = tailSeen{d.State, d.AttemptCount}
	}
	return nil
}

func (t *tailer) list(ctx context.Context) ([]client.Delivery, error) {
	p := t.p
	p.Since, p.Limit = t.since, 1000
	var out []client.Delivery
	for range tailPages {
		res, err := t.c.api.ListDeliveries(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, res.Data...)
		if res.NextCursor == nil {
			break
		}
		p.Cursor = *res.NextCursor
	}
	return out, nil
}

func (t *tailer) poll(ctx context.Context) error {
	list, err := t.list(ctx)
	if err != nil {
		return err
	}
	var oldestOpen, newest time.Time
	// Oldest first, so lines appear in the order things happened.
	for i := len(list) - 1; i >= 0; i-- {
		d := &list[i]
		created, _ := time.Parse(time.RFC3339Nano, d.CreatedAt)
		if created.After(newest) {
			newest = created
		}
		if !d.Final() && (oldestOpen.IsZero() || created.Before(oldestOpen)) {
			oldestOpen = created
		}
		if prev := t.seen[d.ID]; prev.state == d.State && prev.attempts == d.AttemptCount {
			continue
		}
		if err := t.show(ctx, d); err != nil {
			return err
		}
	}
	switch {
	case !oldestOpen.IsZero():
		t.since = oldestOpen
	case !newest.IsZero():
		t.since = newest
	}
	return nil
}

// show prints what changed in d since it was last shown: each new attempt,
// or its new state. The delivery is read in full for its attempts and
// event type; the full read may be newer than the list, and what it shows
// is what is remembered.
func (t *tailer) show(ctx context.Context, d *client.Delivery) error {
	prev := t.seen[d.ID]
	full, err := t.c.api.GetDelivery(ctx, d.ID)
	if err != nil {
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
			return err
		}
		full = d // deleted since the list: show what the list said
	}
	dest, err := t.destination(ctx, full.SubscriptionID)
	if err != nil {
		return err
	}
	var attempts []client.Attempt
	if full.Attempts != nil {
		attempts = *full.Attempts
	}
	shown := prev.attempts
	printedState := false
	for i, a := range attempts {
		if a.N <= prev.attempts {
			continue
		}
		state := full.State
		// An attempt that was followed by another, or whose successor is
		// under way, left the delivery pending (a retry) or delivered.
		if i < len(attempts)-1 || full.State == "in_flight" {
			state = "pending"
			if a.Error == "" {
				state = "delivered"
			}
		}
		// Headers, stored or rebuilt, are for deliveries get.
		a.Request, a.RequestHeaders, a.ResponseHeaders = nil, nil, nil
		if err := t.print(full, state, dest, &a); err != nil {
			return err
		}
		shown = a.N
		printedState = state == full.State
	}
	if !printedState && full.State != prev.state {
		if err := t.print(full, full.State, dest, nil); err != nil {
			return err
		}
	}
	t.seen[d.ID] = tailSeen{full.State, max(shown, full.AttemptCount)}
	return nil
}

// destination returns the subscription's destination on one line, as
// subscriptions list shows it.
func (t *tailer) destination(ctx context.Context, id string) (string, error) {
	if s, ok := t.dests[id]; ok {
		return s, nil
	}
	sub, err := t.c.api.GetSubscription(ctx, id)
	var ae *client.APIError
	switch {
	case err == nil:
		t.dests[id] = destinationText(sub)
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		t.dests[id] = "(deleted subscription)"
	default:
		return "", err
	}
	return t.dests[id], nil
}

// tailLine is one --json line of tail: the delivery (state as of the line),
// its event type and destination, and the attempt the line is about (absent
// on a state change without an attempt).
type tailLine struct {
	client.Delivery
	Destination string          `json:"destination"`
	Attempt     *client.Attempt `json:"attempt,omitempty"`
}

func (t *tailer) print(d *client.Delivery, state, dest string, a *client.Attempt) error {
	if t.p.State != "" && state != t.p.State {
		return nil // --state: an earlier attempt's line is in another state
	}
	if t.c.json {
		line := tailLine{Delivery: *d, Destination: dest, Attempt: a}
		line.State, line.Attempts, line.WaitingFor = state, nil, nil
		return t.c.out(line)
	}
	typ := d.EventType
	if typ == "" {
		typ = "?" // the event was swept
	}
	what := fmt.Sprintf("attempts=%d %s", d.AttemptCount, lastOutcome(d))
	if a != nil {
		what = fmt.Sprintf("attempt=%d tier=%d %s", a.N, a.Tier, attemptOutcome(a))
	}
	_, err := fmt.Fprintf(t.c.stdout, "%s  %-24s %-10s %s  %s → %s  sub=%s event=%s\n",
		time.Now().Format("15:04:05"), d.ID, state, strings.TrimSpace(what), typ, dest, d.SubscriptionID, d.EventID)
	return err
}

// attemptOutcome renders one attempt like lastOutcome: "200", "503
// http_status", "timeout".
func attemptOutcome(a *client.Attempt) string {
	return lastOutcome(&client.Delivery{LastStatus: a.Status, LastError: a.Error})
}
