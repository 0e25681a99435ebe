package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/client"
)

// natsBroker is NATS JetStream: one file-backed stream over
// herald-bench.<run>.>, the raw phase publishing to .raw and herald to
// .events.
type natsBroker struct {
	url                string
	stream             string
	subject, rawSubj   string
	nc, consumerNC     *nats.Conn
	js                 jetstream.JetStream
	consumeCtx         jetstream.ConsumeContext
	eventType, msgIDPf string
}

func newNATSBroker(ctx context.Context, rawURL, run string) (*natsBroker, error) {
	b := &natsBroker{
		url: rawURL, stream: "HERALD_BENCH_" + strings.ToUpper(run),
		subject: "herald-bench." + run + ".events", rawSubj: "herald-bench." + run + ".raw",
		eventType: "bench." + run, msgIDPf: "raw-" + run + "-",
	}
	nc, err := nats.Connect(rawURL, nats.Name("herald bench"), nats.Timeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("error connecting to NATS: %w", err)
	}
	b.nc = nc
	if b.js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, err
	}
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: b.stream, Subjects: []string{"herald-bench." + run + ".>"}, Storage: jetstream.FileStorage,
	}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("error creating stream %s: %w", b.stream, err)
	}
	return b, nil
}

func (b *natsBroker) rawBody(body []byte) []byte { return body }

// rawWorker publishes on the shared connection (herald holds one per
// connection too) with a Nats-Msg-Id, as herald does, and waits for the
// PubAck.
func (b *natsBroker) rawWorker(context.Context) (func(context.Context, []byte) error, func(), error) {
	publish := func(ctx context.Context, body []byte) error {
		h := rawHeaders(b.eventType, rawSeq.Add(1))
		m := &nats.Msg{Subject: b.rawSubj, Header: nats.Header{}, Data: body}
		for k, v := range h {
			m.Header.Set(k, v)
		}
		_, err := b.js.PublishMsg(ctx, m, jetstream.WithMsgID(b.msgIDPf+h["webhook-id"]))
		return err
	}
	return publish, func() {}, nil
}

func (b *natsBroker) consume(ctx context.Context, a *arrivals) error {
	nc, err := nats.Connect(b.url, nats.Name("herald bench consumer"), nats.Timeout(5*time.Second))
	if err != nil {
		return err
	}
	b.consumerNC = nc
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, b.stream, jetstream.ConsumerConfig{
		FilterSubject: b.subject, AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: -1, InactiveThreshold: time.Minute,
	})
	if err != nil {
		return err
	}
	b.consumeCtx, err = cons.Consume(func(m jetstream.Msg) {
		a.arrived(m.Headers().Get("webhook-id"), m.Data(), time.Now())
		_ = m.Ack()
	})
	return err
}

func (b *natsBroker) connection(name string) *client.ConnectionInput {
	return connectionInput(name, "nats", b.url)
}

func (b *natsBroker) destination(conn string) client.Destination {
	return client.NATSDestination(conn, b.subject)
}

func (b *natsBroker) close() {
	if b.consumeCtx != nil {
		b.consumeCtx.Stop()
	}
	if b.consumerNC != nil {
		b.consumerNC.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = b.js.DeleteStream(ctx, b.stream)
	b.nc.Close()
}
