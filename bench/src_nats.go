package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/client"
)

// natsSource is NATS JetStream for --source: a file-backed stream per
// place over herald-bench-src.<run>.<place>, deleted afterwards.
type natsSource struct {
	url     string
	run     string
	nc      *nats.Conn
	js      jetstream.JetStream
	mu      sync.Mutex
	streams []string
}

func newNATSSourceBroker(_ context.Context, rawURL, run string) (*natsSource, error) {
	nc, err := nats.Connect(rawURL, nats.Name("herald bench source"), nats.Timeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("error connecting to NATS: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsSource{url: rawURL, run: run, nc: nc, js: js}, nil
}

func (b *natsSource) live() bool { return false }

// place creates a stream; the place is "<stream> <subject>".
func (b *natsSource) place(ctx context.Context, suffix string) (string, error) {
	name := "HERALD_BENCH_SRC_" + strings.ToUpper(b.run+"_"+suffix)
	subj := "herald-bench-src." + b.run + "." + suffix
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subj}, Storage: jetstream.FileStorage}); err != nil {
		return "", fmt.Errorf("error creating stream %s: %w", name, err)
	}
	b.mu.Lock()
	b.streams = append(b.streams, name)
	b.mu.Unlock()
	return name + " " + subj, nil
}

func splitPlace(p string) (stream, subject string) {
	stream, subject, _ = strings.Cut(p, " ")
	return stream, subject
}

// preload publishes asynchronously, at most 1,000 PubAcks outstanding.
func (b *natsSource) preload(ctx context.Context, place string, n int64, body func(int64) []byte) error {
	_, subj := splitPlace(place)
	js, err := jetstream.New(b.nc, jetstream.WithPublishAsyncMaxPending(1000))
	if err != nil {
		return err
	}
	for i := int64(0); i < n; i++ {
		if _, err := js.PublishAsync(subj, body(i)); err != nil {
			return err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// rawConsume pulls through a durable consumer with MaxAckPending =
// prefetch and acks every message.
func (b *natsSource) rawConsume(ctx context.Context, place string, n int64, prefetch int, ready func()) error {
	stream, _ := splitPlace(place)
	c, err := b.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "raw",
		AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: prefetch})
	if err != nil {
		return err
	}
	it, err := c.Messages(jetstream.PullMaxMessages(prefetch))
	if err != nil {
		return err
	}
	defer it.Stop()
	ready()
	var got int64
	for got < n {
		m, err := it.Next()
		if err != nil {
			return fmt.Errorf("%d of %d consumed: %w", got, n, err)
		}
		if err := m.Ack(); err != nil {
			return err
		}
		got++
	}
	return nil
}

func (b *natsSource) publisher(_ context.Context, place string) (func(context.Context, []byte) error, error) {
	_, subj := splitPlace(place)
	return func(ctx context.Context, body []byte) error {
		_, err := b.js.Publish(ctx, subj, body)
		return err
	}, nil
}

func (b *natsSource) sourceInput(name, conn, place string) client.SourceInput {
	stream, subj := splitPlace(place)
	return client.SourceInput{Name: name, Type: "nats", Connection: conn, Stream: stream, Subject: subj}
}

func (b *natsSource) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range b.streams {
		_ = b.js.DeleteStream(ctx, s)
	}
	b.nc.Close()
}
