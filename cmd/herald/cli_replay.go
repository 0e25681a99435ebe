package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/heraldhq/herald/client"
)

// Resend and replay: new deliveries of stored events (docs/api.md
// "Resend and replay"). Each run sends again, so replay counts first and
// asks, as dead-letters redrive does.

func eventResend(fs *flag.FlagSet) action {
	var sub string
	fs.StringVar(&sub, "subscription", "", "the subscription to send the event to (required)")
	fs.StringVar(&sub, "subscription-id", "", "same as --subscription")
	tenant := fs.String("tenant", "", "the event's tenant, when its id is used by several tenants")
	return func(ctx context.Context, c *cli, args []string) error {
		if sub == "" {
			return usagef("--subscription is required")
		}
		res, err := c.api.ResendEvent(ctx, args[0], sub, *tenant)
		if err != nil {
			return err
		}
		if c.json {
			return c.out(res)
		}
		fmt.Fprintf(c.stdout, "resent %s to %s: delivery %s\n", res.EventID, res.SubscriptionID, res.DeliveryID)
		return nil
	}
}

func subscriptionReplay(fs *flag.FlagSet) action {
	since := fs.String("since", "", "replay events published at or after this time (RFC 3339, or a duration ago: 24h; required)")
	until := fs.String("until", "", "...and before this time (default: now); at most 31 days after --since")
	types := fs.String("event-types", "", "only these event type patterns, comma-separated (narrows the subscription's own)")
	dry := fs.Bool("dry-run", false, "only count the events that would be replayed")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	return func(ctx context.Context, c *cli, args []string) error {
		if *since == "" {
			return usagef("--since is required")
		}
		p := client.ReplayParams{SubscriptionID: args[0], EventTypes: splitList(*types), DryRun: true}
		var err error
		if p.Since, err = parseTime("since", *since); err != nil {
			return err
		}
		if p.Until, err = parseTime("until", *until); err != nil {
			return err
		}
		if p.Until.IsZero() {
			p.Until = time.Now()
		}
		// Count every page first: the confirmation and the bar need the
		// total, and a replay cannot be taken back.
		matched := 0
		for {
			res, err := c.api.Replay(ctx, p)
			if err != nil {
				return err
			}
			matched += res.Matched
			if !res.Truncated || res.NextCursor == nil {
				break
			}
			p.Cursor = *res.NextCursor
		}
		if *dry || matched == 0 {
			if c.json {
				return c.out(client.ReplayResult{Matched: matched, DryRun: true})
			}
			fmt.Fprintf(c.stdout, "%d event(s) match\n", matched)
			return nil
		}
		if !*yes {
			ok, err := c.confirm(fmt.Sprintf("Replay %d event(s) to %s? Each is sent again, even if it was delivered", matched, p.SubscriptionID))
			if err != nil {
				return err
			}
			if !ok {
				return usagef("replay not confirmed; nothing was sent")
			}
		}
		p.DryRun, p.Cursor = false, ""
		total := client.ReplayResult{}
		bar := c.newProgress("replaying", int64(matched))
		for {
			res, err := c.api.Replay(ctx, p)
			if err != nil {
				bar.done()
				return err
			}
			total.Matched += res.Matched
			total.Replayed += res.Replayed
			bar.set(int64(total.Replayed), false)
			if !res.Truncated || res.NextCursor == nil {
				break
			}
			p.Cursor = *res.NextCursor
		}
		bar.set(int64(total.Replayed), true)
		bar.done()
		if c.json {
			return c.out(total)
		}
		fmt.Fprintf(c.stdout, "replayed %d of %d matching event(s) to %s\n", total.Replayed, total.Matched, p.SubscriptionID)
		return nil
	}
}
