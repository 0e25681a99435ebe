package redisdest

import "time"

// SetNow replaces p's clock.
func SetNow(p *Publisher, now func() time.Time) {
	p.pool.SetNow(now)
}

// Clients is the number of p's open clients.
func Clients(p *Publisher) int {
	return p.pool.Len()
}
