package redissrc

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/heraldhq/herald/source"
)

// Settle acknowledges acked in one XACK and copies each rejected entry to
// <stream>:rejected, acknowledging the rejected ones only once every copy
// is there: a failed copy leaves them pending, to be re-read and rejected
// again after the runner dials anew.
func (c *consumer) Settle(ctx context.Context, acked, rejected []*source.Message) error {
	if len(acked)+len(rejected) == 0 {
		return nil
	}
	// One round trip: the copies, then the acknowledgement of the
	// committed entries (independent of the copies).
	pipe := c.rdb.Pipeline()
	copies := make([]*redis.StringCmd, 0, len(rejected))
	for _, m := range rejected {
		copies = append(copies, pipe.XAdd(ctx, &redis.XAddArgs{Stream: c.stream + rejectedSuffix,
			MaxLen: rejectedMaxLen, Approx: true, Values: rejectFields(m)}))
	}
	var ack *redis.IntCmd
	if len(acked) > 0 {
		ack = pipe.XAck(ctx, c.stream, c.group, ids(acked)...)
	}
	_, _ = pipe.Exec(ctx) // each command's own error is checked below
	for _, cmd := range copies {
		if err := cmd.Err(); err != nil {
			return c.settleError(ctx, "copying a rejected entry to "+c.stream+rejectedSuffix, err)
		}
	}
	if ack != nil {
		if err := ack.Err(); err != nil {
			return c.settleError(ctx, "acknowledging", err)
		}
	}
	if len(rejected) > 0 {
		if err := c.rdb.XAck(ctx, c.stream, c.group, ids(rejected)...).Err(); err != nil {
			return c.settleError(ctx, "acknowledging rejected entries", err)
		}
	}
	return nil
}

func (c *consumer) settleError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("redis: %s: %w", what, ctx.Err())
	}
	return fmt.Errorf("redis: %s: %w", what, err)
}

// rejectFields are a rejected entry's copy: body, reason, message, id
// (the entry id) and headers (the other fields as a JSON object, when
// there are any).
func rejectFields(m *source.Message) []any {
	fields := []any{"body", string(m.Body), "reason", m.RejectReason, "message", m.RejectMessage,
		"id", m.Token.(string)}
	if len(m.Headers) > 0 {
		h, err := json.Marshal(m.Headers)
		if err == nil { // a map of strings always encodes
			fields = append(fields, "headers", string(h))
		}
	}
	return fields
}

func ids(msgs []*source.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Token.(string)
	}
	return out
}

// Pending is the group's lag plus its pending entries (XINFO GROUPS);
// unknown when Redis cannot tell the lag or the group is gone.
func (c *consumer) Pending(ctx context.Context) (int64, bool) {
	groups, err := c.rdb.XInfoGroups(ctx, c.stream).Result()
	if err != nil {
		return 0, false
	}
	for _, g := range groups {
		if g.Name == c.group {
			if g.Lag < 0 {
				return 0, false
			}
			return g.Lag + g.Pending, true
		}
	}
	return 0, false
}
