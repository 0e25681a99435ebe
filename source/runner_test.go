package source

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// refusingPublisher refuses (not transiently) every batch holding an
// event of type "refused", as a store refuses a bad row.
type refusingPublisher struct{ calls int }

func (p *refusingPublisher) PublishMany(_ context.Context, evs []*herald.Event) ([]store.EventInsertResult, error) {
	p.calls++
	res := make([]store.EventInsertResult, len(evs))
	for i, ev := range evs {
		if ev.Type == "refused" {
			return nil, errors.New("constraint failed")
		}
		res[i] = store.EventInsertResult{ID: ev.ID}
	}
	return res, nil
}

// handle runs one batch through the pipeline's steps alone, as consume
// does with each.
func handle(ctx context.Context, r *runner, c Consumer, msgs []*Message) error {
	b := &batch{}
	r.convert(b, msgs)
	r.commit(ctx, b)
	<-b.done
	if b.err != nil {
		return fmt.Errorf("%w: %w", errStore, b.err)
	}
	return r.settle(ctx, c, b)
}

// settleRecorder is the Consumer side of handle: what it was told.
type settleRecorder struct {
	acked, rejected []*Message
}

func (s *settleRecorder) Receive(context.Context, int) ([]*Message, error) { return nil, nil }
func (s *settleRecorder) Settle(_ context.Context, acked, rejected []*Message) error {
	s.acked, s.rejected = acked, rejected
	return nil
}
func (s *settleRecorder) Pending(context.Context) (int64, bool) { return 0, false }
func (s *settleRecorder) Close() error                          { return nil }

// A batch the store refuses is split down to the refused event: only it
// is rejected, every other message is acknowledged, in receive order.
func TestHandleSplitsOnRefusal(t *testing.T) {
	t.Parallel()
	src := &herald.Source{Name: "s", Type: herald.DestinationAMQP}
	pub := &refusingPublisher{}
	m := New(Config{Publisher: pub})
	r := &runner{m: m, src: src, conv: conv(t, src), stats: &stats{}}
	var msgs []*Message
	for i, typ := range []string{"a", "b", "refused", "c", "d", "e", "f", "g"} {
		msgs = append(msgs, &Message{Body: []byte(`{}`), Route: typ, MessageID: string(rune('0' + i))})
	}
	msgs = append(msgs, &Message{Body: []byte(`nope`), Route: "x", MessageID: "9"})
	rec := &settleRecorder{}
	require.NoError(t, handle(context.Background(), r, rec, msgs))
	require.Len(t, rec.acked, 7)
	require.Len(t, rec.rejected, 2)
	require.Equal(t, "2", rec.rejected[0].MessageID)
	require.Equal(t, herald.RejectInvalid, rec.rejected[0].RejectReason)
	require.Equal(t, "9", rec.rejected[1].MessageID)
	require.Equal(t, herald.RejectNotJSON, rec.rejected[1].RejectReason)
	for i := 1; i < len(rec.acked); i++ {
		require.Less(t, rec.acked[i-1].MessageID, rec.acked[i].MessageID, "receive order")
	}
	rep := r.stats.take()
	require.EqualValues(t, 7, rep.consumed)
	require.EqualValues(t, 2, rep.rejected)
	require.LessOrEqual(t, pub.calls, 1+2*4, "about 2·log2(n) extra commits")
}

// A transient store failure settles nothing.
func TestHandleStoreUnavailableSettlesNothing(t *testing.T) {
	t.Parallel()
	src := &herald.Source{Name: "s", Type: herald.DestinationAMQP}
	m := New(Config{Publisher: downPublisher{}})
	r := &runner{m: m, src: src, conv: conv(t, src), stats: &stats{}}
	rec := &settleRecorder{}
	err := handle(context.Background(), r, rec, []*Message{{Body: []byte(`{}`), Route: "a"}, {Body: []byte(`x`), Route: "a"}})
	require.ErrorIs(t, err, errStore)
	require.Nil(t, rec.acked)
	require.Nil(t, rec.rejected)
}

type downPublisher struct{}

func (downPublisher) PublishMany(context.Context, []*herald.Event) ([]store.EventInsertResult, error) {
	return nil, herald.ErrStoreUnavailable
}
