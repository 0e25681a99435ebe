package bench

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/client"
)

// Bursts on the side (`--burst N --burst-every D`, issue 28's soak): every
// D, N events go through the batch API (100 a call, 8 publishers) to a
// subscription of their own on a receiver of their own, while the measured
// load runs. The measured latency stays the steady stream's: the question
// is whether it holds while, and after, the node works off a burst. The
// burst's deliveries must all arrive too (lost otherwise).

// burstCall is the events per batch call of a burst, and burstPublishers
// the concurrent calls.
const (
	burstCall       = 100
	burstPublishers = 8
)

// burster publishes the bursts.
type burster struct {
	api       *client.Client
	eventType string
	n         int64
	every     time.Duration
	recv      *Receiver

	bursts    atomic.Int64
	published atomic.Int64
	wanted    atomic.Int64
	errors    atomic.Int64

	stop chan struct{}
	done chan struct{}
}

// startBursts subscribes a receiver of its own to eventType and publishes
// a burst every cfg.BurstEvery until stopBursts.
func startBursts(ctx context.Context, api *client.Client, eventType string, n int64, every time.Duration) (*burster, error) {
	recv, err := NewReceiver(ReceiverConfig{})
	if err != nil {
		return nil, err
	}
	if _, err := createSubscription(ctx, api, recv.URL()+"/hook", eventType); err != nil {
		_ = recv.Close()
		return nil, err
	}
	b := &burster{api: api, eventType: eventType, n: n, every: every, recv: recv, stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop(ctx)
	return b, nil
}

func (b *burster) loop(ctx context.Context) {
	defer close(b.done)
	tk := time.NewTicker(b.every)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.stop:
			return
		case <-tk.C:
			b.burst(ctx)
		}
	}
}

// burst publishes one burst of b.n events as fast as it can.
func (b *burster) burst(ctx context.Context) {
	b.bursts.Add(1)
	body := EventBody(b.eventType, time.Now(), "")
	var next atomic.Int64
	var wg sync.WaitGroup
	for range burstPublishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				hi := next.Add(burstCall)
				lo := hi - burstCall
				if lo >= b.n {
					return
				}
				events := make([]json.RawMessage, min(hi, b.n)-lo)
				for i := range events {
					events[i] = body
				}
				accepted, deliveries, err := publishBatch(ctx, b.api, events)
				if err != nil {
					b.errors.Add(int64(len(events)))
					continue
				}
				b.published.Add(accepted)
				b.wanted.Add(deliveries)
			}
		}()
	}
	wg.Wait()
}

// stopBursts ends the bursts (a burst in progress finishes first).
func (b *burster) stopBursts() {
	close(b.stop)
	<-b.done
}

// settled reports whether every burst delivery arrived.
func (b *burster) settled() bool { return b.recv.Delivered() >= b.wanted.Load() }

// close stops the burst receiver.
func (b *burster) close() { _ = b.recv.Close() }
