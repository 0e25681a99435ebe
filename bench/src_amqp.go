package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/heraldhq/herald/client"
)

// amqpSource is RabbitMQ for --source: durable queues on the default
// exchange, deleted afterwards.
type amqpSource struct {
	url    string
	run    string
	conn   *amqp.Connection
	mu     sync.Mutex
	queues []string
}

func newAMQPSourceBroker(_ context.Context, rawURL, run string) (*amqpSource, error) {
	conn, err := amqp.DialConfig(rawURL, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second), Properties: amqp.Table{"connection_name": "herald bench source"}})
	if err != nil {
		return nil, fmt.Errorf("error connecting to RabbitMQ: %w", err)
	}
	return &amqpSource{url: rawURL, run: run, conn: conn}, nil
}

func (b *amqpSource) live() bool { return false }

func (b *amqpSource) place(_ context.Context, suffix string) (string, error) {
	q := "herald-bench-src-" + b.run + "-" + suffix
	ch, err := b.conn.Channel()
	if err != nil {
		return "", err
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		return "", fmt.Errorf("error declaring queue %s: %w", q, err)
	}
	b.mu.Lock()
	b.queues = append(b.queues, q)
	b.mu.Unlock()
	return q, nil
}

// preload publishes persistent messages from 8 confirm-mode channels,
// each keeping up to 256 confirms outstanding.
func (b *amqpSource) preload(ctx context.Context, q string, n int64, body func(int64) []byte) error {
	const workers, window = 8, 256
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := int64(0); w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := b.conn.Channel()
			if err != nil {
				errc <- err
				return
			}
			defer ch.Close()
			if err := ch.Confirm(false); err != nil {
				errc <- err
				return
			}
			var pending []*amqp.DeferredConfirmation
			flush := func() error {
				for _, dc := range pending {
					ok, err := dc.WaitContext(ctx)
					if err != nil {
						return err
					}
					if !ok {
						return errNacked
					}
				}
				pending = pending[:0]
				return nil
			}
			for i := w; i < n; i += workers {
				dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, amqp.Publishing{
					ContentType: "application/json", DeliveryMode: amqp.Persistent,
					MessageId: fmt.Sprintf("%s-%d", q, i), Body: body(i)})
				if err != nil {
					errc <- err
					return
				}
				if pending = append(pending, dc); len(pending) >= window {
					if err := flush(); err != nil {
						errc <- err
						return
					}
				}
			}
			if err := flush(); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// rawConsume acks every delivery, one by one, as a plain consumer would.
func (b *amqpSource) rawConsume(ctx context.Context, q string, n int64, prefetch int, ready func()) error {
	conn, err := amqp.DialConfig(b.url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return err
	}
	deliveries, err := ch.ConsumeWithContext(ctx, q, "herald-bench-raw", false, false, false, false, nil)
	if err != nil {
		return err
	}
	ready()
	var got int64
	for got < n {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return fmt.Errorf("consumer closed after %d of %d", got, n)
			}
			if err := d.Ack(false); err != nil {
				return err
			}
			got++
		case <-ctx.Done():
			return fmt.Errorf("%d of %d consumed: %w", got, n, ctx.Err())
		}
	}
	return nil
}

func (b *amqpSource) publisher(_ context.Context, q string) (func(context.Context, []byte) error, error) {
	ch, err := b.conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		return nil, err
	}
	var seq int64
	return func(ctx context.Context, body []byte) error {
		seq++
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent,
			MessageId: fmt.Sprintf("%s-lat-%d", q, seq), Body: body})
		if err != nil {
			return err
		}
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return errNacked
		}
		return nil
	}, nil
}

func (b *amqpSource) sourceInput(name, conn, q string) client.SourceInput {
	return client.SourceInput{Name: name, Type: "amqp", Connection: conn, Queue: q}
}

func (b *amqpSource) close() {
	if ch, err := b.conn.Channel(); err == nil {
		for _, q := range b.queues {
			_, _ = ch.QueueDelete(q, false, false, false)
		}
		ch.Close()
	}
	b.conn.Close()
}
