package redisdest

import "time"

// SetNow replaces p's clock.
func SetNow(p *Publisher, now func() time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now = now
}

// Clients is the number of p's open clients.
func Clients(p *Publisher) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.clients)
}
