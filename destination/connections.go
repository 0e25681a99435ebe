package destination

import (
	"context"
	"fmt"
	"sync"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/webhook"
)

// Connections resolves the operator-owned connection a destination names,
// with its URL readable (password unsealed). cmd/herald backs it by the
// store through a short cache; tests use Static.
type Connections interface {
	// ConnectionResolve returns the connection called name, or an error
	// (herald.ErrNotFound when there is none).
	ConnectionResolve(ctx context.Context, name string) (*herald.Connection, error)
}

// Static is a fixed set of connections by name.
type Static struct {
	mu    sync.RWMutex
	conns map[string]*herald.Connection
}

// NewStatic returns a Static holding conns.
func NewStatic(conns ...*herald.Connection) *Static {
	s := &Static{conns: map[string]*herald.Connection{}}
	for _, c := range conns {
		s.conns[c.Name] = c
	}
	return s
}

// Put adds or replaces a connection.
func (s *Static) Put(c *herald.Connection) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns[c.Name] = c
}

// ConnectionResolve implements Connections.
func (s *Static) ConnectionResolve(_ context.Context, name string) (*herald.Connection, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.conns[name]
	if !ok {
		return nil, herald.NotFoundf("no connection %q", name)
	}
	return c, nil
}

// Resolve looks up the connection r's destination names and checks it
// may carry it: it exists, has the destination's type and is granted to
// the event's tenant. The API checks the same at create time; this catches
// a connection changed or deleted since. The Result is the failure to
// record (retried through the tiers: an operator can fix the connection).
func Resolve(ctx context.Context, conns Connections, d herald.Destination, tenant string) (*herald.Connection, *webhook.Result) {
	c, err := conns.ConnectionResolve(ctx, d.Connection)
	if err != nil {
		return nil, &webhook.Result{Class: herald.ErrorConnectionUnset,
			Message: fmt.Sprintf("connection %q is not available: %s", d.Connection, herald.CleanLine(err.Error(), 160))}
	}
	if c.Type != d.Type {
		return nil, &webhook.Result{Class: herald.ErrorConnectionUnset,
			Message: fmt.Sprintf("connection %q is of type %s, not %s", d.Connection, c.Type, d.Type)}
	}
	if !c.Allows(tenant) {
		return nil, &webhook.Result{Class: herald.ErrorConnectionUnset,
			Message: fmt.Sprintf("connection %q is not granted to tenant %q", d.Connection, tenant)}
	}
	return c, nil
}
