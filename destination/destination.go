package destination

import (
	"context"
	"fmt"
	"sync"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/webhook"
)

// Publisher makes one attempt to one type of destination. It is safe for
// concurrent use. Send never returns an error: the outcome is the Result
// (Success, or a Class with a Message; Permanent when retrying cannot
// help). When ctx is cancelled (shutdown), the Result is a failure and the
// caller does not count the attempt.
type Publisher interface {
	Send(ctx context.Context, r *webhook.Request) webhook.Result
	// Close releases the publisher's connections. Sends after Close fail.
	Close()
}

// Router sends each request through the Publisher of its destination type.
// It implements delivery.Sender.
type Router struct {
	mu   sync.RWMutex
	pubs map[herald.DestinationType]Publisher
}

// NewRouter returns a Router that sends webhooks through webhooks (the
// *webhook.Sender); Register adds the other types.
func NewRouter(webhooks Publisher) *Router {
	return &Router{pubs: map[herald.DestinationType]Publisher{herald.DestinationWebhook: webhooks}}
}

// Register makes p the Publisher of type t.
func (r *Router) Register(t herald.DestinationType, p Publisher) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pubs[t] = p
}

// Send implements delivery.Sender.
func (r *Router) Send(ctx context.Context, req *webhook.Request) webhook.Result {
	t := req.Destination.Type
	if t == "" {
		t = herald.DestinationWebhook
	}
	r.mu.RLock()
	p := r.pubs[t]
	r.mu.RUnlock()
	if p == nil {
		// The API refuses unknown types; this is a type this binary was
		// built or started without. Retrying lets a fixed node deliver it.
		return webhook.Result{Class: herald.ErrorInvalidRequest,
			Message: fmt.Sprintf("destination type %q is not available on this node", t)}
	}
	res := p.Send(ctx, req)
	// Messages and excerpts quote what a broker or push service said; they
	// are stored as attempt text, so every type's are cleaned here, once,
	// as the webhook Sender cleans its own (valid UTF-8, no NUL, bounded).
	res.Message = herald.CleanLine(res.Message, MaxMessageLen)
	res.Excerpt = herald.CleanText(res.Excerpt, herald.ResponseExcerptLimit)
	return res
}

// MaxMessageLen bounds Result.Message, as the webhook Sender does.
const MaxMessageLen = 256

// Close closes every registered publisher.
func (r *Router) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pubs {
		p.Close()
	}
}
