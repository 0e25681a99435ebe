package push

// Observer receives the push service's measurements; package metrics
// implements it (metrics.PushObserver). A nil Observer in Config is replaced
// by one that ignores everything.
type Observer interface {
	// ObserveConnected is called with +1 when a user agent finishes its
	// hello and -1 when its socket closes.
	ObserveConnected(delta int)
	// ObserveMessageIn counts one POST to an endpoint by outcome: "direct"
	// (a connected user agent acked it), "stored", "dropped_ttl0", or
	// "rejected" with the errno of the answer in code.
	ObserveMessageIn(outcome string, errno int)
	// ObserveAck counts acks by their code (100, 101, 102) and
	// ObserveNack nacks by theirs (301, 302, 303).
	ObserveAck(code int)
	ObserveNack(code int)
	// ObserveHandoff counts node-to-node hand-offs by kind ("push",
	// "notif") and result ("ok", "not_here", "error").
	ObserveHandoff(kind, result string)
	// ObserveDeliveryLatency is the time from the endpoint's receipt of a
	// message to the frame written to the user agent, in seconds.
	ObserveDeliveryLatency(seconds float64)
}

type nopObserver struct{}

func (nopObserver) ObserveConnected(int)           {}
func (nopObserver) ObserveMessageIn(string, int)   {}
func (nopObserver) ObserveAck(int)                 {}
func (nopObserver) ObserveNack(int)                {}
func (nopObserver) ObserveHandoff(string, string)  {}
func (nopObserver) ObserveDeliveryLatency(float64) {}
