package store

// Reasons a pending delivery waits because of its subscription's throttle
// (see ThrottleMargin for the rules); DeliveryWaitingFor reports them.
const (
	// WaitingForPaused: the subscription is paused by a Retry-After.
	WaitingForPaused WaitingFor = "paused"
	// WaitingForRateLimit: the subscription spent its rate_limit budget.
	WaitingForRateLimit WaitingFor = "rate_limit"
	// WaitingForInFlightCap: the subscription has max_in_flight requests
	// running.
	WaitingForInFlightCap WaitingFor = "in_flight_cap"
)
