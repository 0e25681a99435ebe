package bench

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/heraldhq/herald/client"
)

// amqpBroker is RabbitMQ: durable queues on the default exchange, one for
// the raw phase and one herald publishes to (routing key = the queue).
type amqpBroker struct {
	url             string
	queue, rawQueue string
	conn            *amqp.Connection // raw publishers' channels, declare and delete
	consumer        *amqp.Connection // separate, as amqp091-go advises
	eventType       string
}

func newAMQPBroker(_ context.Context, rawURL, run string) (*amqpBroker, error) {
	b := &amqpBroker{url: rawURL, queue: "herald-bench-" + run, rawQueue: "herald-bench-" + run + "-raw", eventType: "bench." + run}
	conn, err := amqp.DialConfig(rawURL, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second), Properties: amqp.Table{"connection_name": "herald bench"}})
	if err != nil {
		return nil, fmt.Errorf("error connecting to RabbitMQ: %w", err)
	}
	b.conn = conn
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, err
	}
	defer ch.Close()
	for _, q := range []string{b.queue, b.rawQueue} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			b.close()
			return nil, fmt.Errorf("error declaring queue %s: %w", q, err)
		}
	}
	return b, nil
}

func (b *amqpBroker) rawBody(body []byte) []byte { return body }

// rawWorker publishes on its own confirm-mode channel, persistent and
// mandatory as herald does, and waits for the confirm.
func (b *amqpBroker) rawWorker(context.Context) (func(context.Context, []byte) error, func(), error) {
	ch, err := b.conn.Channel()
	if err != nil {
		return nil, nil, err
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, nil, err
	}
	publish := func(ctx context.Context, body []byte) error {
		h := rawHeaders(b.eventType, rawSeq.Add(1))
		t := amqp.Table{}
		for k, v := range h {
			t[k] = v
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", b.rawQueue, true, false, amqp.Publishing{
			Headers: t, ContentType: "application/json", DeliveryMode: amqp.Persistent,
			MessageId: h["webhook-id"], Timestamp: time.Now(), Type: b.eventType, AppId: "herald-bench", Body: body,
		})
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
	}
	return publish, func() { ch.Close() }, nil
}

func (b *amqpBroker) consume(_ context.Context, a *arrivals) error {
	conn, err := amqp.DialConfig(b.url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second), Properties: amqp.Table{"connection_name": "herald bench consumer"}})
	if err != nil {
		return err
	}
	b.consumer = conn
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Qos(1000, 0, false); err != nil {
		return err
	}
	deliveries, err := ch.Consume(b.queue, "herald-bench", true, true, false, false, nil)
	if err != nil {
		return err
	}
	go func() {
		for d := range deliveries {
			id, _ := d.Headers["webhook-id"].(string)
			if id == "" {
				id = d.MessageId
			}
			a.arrived(id, d.Body, time.Now())
		}
	}()
	return nil
}

func (b *amqpBroker) connection(name string) *client.ConnectionInput {
	return connectionInput(name, "amqp", b.url)
}

func (b *amqpBroker) destination(conn string) client.Destination {
	return client.AMQPDestination(conn, "", b.queue)
}

func (b *amqpBroker) close() {
	if b.consumer != nil {
		b.consumer.Close()
	}
	if ch, err := b.conn.Channel(); err == nil {
		for _, q := range []string{b.queue, b.rawQueue} {
			_, _ = ch.QueueDelete(q, false, false, false)
		}
		ch.Close()
	}
	b.conn.Close()
}
