package herald

import (
	"encoding/json"
	"strings"
	"time"
)

// Ordering is a subscription's per-key ordering mode.
type Ordering string

const (
	// OrderingNone delivers with full parallelism (the default).
	OrderingNone Ordering = "none"
	// OrderingFIFO sends deliveries of one event key one at a time, in
	// publish order.
	OrderingFIFO Ordering = "fifo"
	// OrderingLatest sends one at a time per key and skips versions not
	// newer than the last delivered one.
	OrderingLatest Ordering = "latest"
)

// Valid reports whether o is a known mode.
func (o Ordering) Valid() bool {
	switch o {
	case OrderingNone, OrderingFIFO, OrderingLatest:
		return true
	}
	return false
}

// SubscriptionState is enabled or disabled.
type SubscriptionState string

const (
	SubscriptionEnabled  SubscriptionState = "enabled"
	SubscriptionDisabled SubscriptionState = "disabled"
)

// Filter selects events by content. At most one field is set.
type Filter struct {
	CEL      string          `json:"cel,omitempty"`
	JMESPath string          `json:"jmespath,omitempty"`
	ESQuery  json.RawMessage `json:"es_query,omitempty"`
}

// IsZero reports whether no filter is set.
func (f *Filter) IsZero() bool {
	return f == nil || (f.CEL == "" && f.JMESPath == "" && len(f.ESQuery) == 0)
}

// RateLimit allows at most Max request starts in any window of PerSeconds.
type RateLimit struct {
	Max        int `json:"max"`
	PerSeconds int `json:"per_seconds"`
}

// Subscription routes matching events to one destination.
type Subscription struct {
	ID string `json:"id"`
	// URL and Method are the webhook destination's (kept at the top level
	// for clients older than Destination); "" for other types.
	URL    string `json:"url"`
	Method string `json:"method"`
	// Destination is where deliveries go; see Dest for the zero value.
	Destination Destination `json:"destination"`
	// EventTypes are glob patterns ("bundle.*"); empty matches every type.
	EventTypes    []string          `json:"event_types"`
	Filter        *Filter           `json:"filter,omitempty"`
	Headers       map[string]string `json:"headers"`
	Ordering      Ordering          `json:"ordering"`
	KeyIntervalMS int64             `json:"key_interval_ms"`
	RateLimit     *RateLimit        `json:"rate_limit,omitempty"`
	// MaxInFlight caps concurrent requests; 0 means no cap.
	MaxInFlight    int               `json:"max_in_flight"`
	TimeoutMS      int64             `json:"timeout_ms"`
	Description    string            `json:"description"`
	Metadata       json.RawMessage   `json:"metadata"`
	State          SubscriptionState `json:"state"`
	DisabledReason string            `json:"disabled_reason"`
	// Tenant, when set, confines the subscription to events of that
	// tenant (ValidTenant); "" is untenanted. Fixed at creation.
	Tenant string `json:"tenant,omitempty"`
	// AllTenants makes an untenanted subscription receive every tenant's
	// events too (an audit sink). Fixed at creation.
	AllTenants bool `json:"all_tenants,omitempty"`
	// AutoDisable is the subscription's own auto-disable rule; nil follows
	// the server's defaults (see AutoDisable).
	AutoDisable *AutoDisable `json:"auto_disable,omitempty"`
	CreatedAt   time.Time    `json:"created_at"`
	UpdatedAt   time.Time    `json:"updated_at"`
}

// Dest returns the subscription's destination: Destination, or, when its
// Type is unset (a subscription built before destinations had types), a
// webhook to URL with Method.
func (s *Subscription) Dest() Destination {
	if s.Destination.Type == "" {
		return Destination{Type: DestinationWebhook, URL: s.URL, Method: s.Method}
	}
	return s.Destination
}

// WantsSystemEvents reports whether the subscription receives herald's own
// herald.* events: only one of its event type patterns names them
// explicitly (a bare "*" does not).
func (s *Subscription) WantsSystemEvents() bool {
	for _, p := range s.EventTypes {
		if strings.HasPrefix(p, "herald.") {
			return true
		}
	}
	return false
}

// Receives reports whether the subscription's tenancy lets it receive an
// event of tenant (untenanted: ""): a tenanted event reaches its tenant's
// subscriptions and untenanted all-tenants ones; an untenanted event
// reaches only untenanted subscriptions.
func (s *Subscription) Receives(tenant string) bool {
	if tenant == "" {
		return s.Tenant == ""
	}
	return s.Tenant == tenant || (s.Tenant == "" && s.AllTenants)
}

// Timeout is the per-request delivery timeout.
func (s *Subscription) Timeout() time.Duration {
	if s.TimeoutMS <= 0 {
		return DefaultTimeout
	}
	return time.Duration(s.TimeoutMS) * time.Millisecond
}

// Subscription defaults and limits.
const (
	// DefaultTimeout is the delivery timeout when a subscription sets none.
	DefaultTimeout = 10 * time.Second
	// MaxTimeout bounds timeout_ms; leases are sized from it.
	MaxTimeout = 5 * time.Minute
	// DefaultSecretGrace is how long a rotated-out secret keeps signing.
	DefaultSecretGrace = 24 * time.Hour
)

// Secret is one signing secret of a subscription ("whsec_" + base64).
// During rotation a subscription has several; each active one signs.
type Secret struct {
	Value     string     `json:"secret"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Unreadable marks a stored secret the configured keys could not
	// decrypt (a wrong --encryption-key, or a row altered in the database);
	// Value is then empty. It signs nothing: a delivery of its subscription
	// fails with ErrorSecretUnreadable rather than going out with fewer
	// signatures than the receiver expects, and no other subscription is
	// affected.
	Unreadable bool `json:"-"`
}

// Active reports whether the secret still signs at now.
func (s Secret) Active(now time.Time) bool {
	return s.ExpiresAt == nil || now.Before(*s.ExpiresAt)
}

// AutoDisable is a subscription's own auto-disable rule: after
// ConsecutiveFailures failed attempts in a row (no success between them)
// whose streak has lasted at least MinDurationS seconds, the subscription
// is disabled with reason DisabledReasonFailing. A nil
// Subscription.AutoDisable follows the server's defaults
// (DefaultAutoDisableFailures, DefaultAutoDisableAfter, or the serve
// flags); a rule with ConsecutiveFailures 0 never disables (the API's
// "auto_disable": null).
type AutoDisable struct {
	ConsecutiveFailures int   `json:"consecutive_failures"`
	MinDurationS        int64 `json:"min_duration_s"`
}

// Never reports whether the rule turns auto-disable off.
func (a *AutoDisable) Never() bool { return a != nil && a.ConsecutiveFailures <= 0 }

// Auto-disable defaults and limits. The time bound is what protects an
// endpoint that is down for a while: the default retry tiers span about
// 3.3 days, so a streak of 5 days means even the last retries of its
// first failures failed, as Svix disables after 5 days of failures. The
// count keeps a quiet endpoint that failed a handful of times over those
// days from being disabled on thin evidence.
const (
	DefaultAutoDisableFailures = 20
	DefaultAutoDisableAfter    = 5 * 24 * time.Hour
	// MaxAutoDisableFailures and MaxAutoDisableDuration bound a
	// subscription's own rule.
	MaxAutoDisableFailures = 1_000_000
	MaxAutoDisableDuration = 365 * 24 * time.Hour
)

// DisabledReasonFailing is the disabled_reason of a subscription
// auto-disabled for failing (AutoDisable).
const DisabledReasonFailing = "failing"

// SubscriptionHealth is how a subscription's endpoint has been answering.
type SubscriptionHealth struct {
	// ConsecutiveFailures counts failed attempts since the last success
	// (or since the subscription was created or last re-enabled).
	ConsecutiveFailures int `json:"consecutive_failures"`
	// FailingSince is the time of the first failed attempt of that streak;
	// nil while the streak is empty.
	FailingSince *time.Time `json:"failing_since"`
	// Attempts24h and SuccessRate24h cover about the last 24 hours,
	// estimated from two day-aligned windows (the previous day's counts
	// weighted by how much of it still lies within 24 h), so reading them
	// costs one row. SuccessRate24h is nil when there were no attempts.
	Attempts24h    int64    `json:"attempts_24h"`
	SuccessRate24h *float64 `json:"success_rate_24h"`
}

// AutoDisableRule is the rule in force for a subscription whose own rule
// is own, on a server whose rule is server (nil: the defaults): nil when
// it is never auto-disabled. A server rule that never disables turns
// auto-disable off for every subscription, their own rules included.
func AutoDisableRule(server, own *AutoDisable) *AutoDisable {
	if server == nil {
		server = &AutoDisable{
			ConsecutiveFailures: DefaultAutoDisableFailures,
			MinDurationS:        int64(DefaultAutoDisableAfter / time.Second),
		}
	}
	rule := server
	if own != nil {
		rule = own
	}
	if server.Never() || rule.Never() {
		return nil
	}
	return rule
}
