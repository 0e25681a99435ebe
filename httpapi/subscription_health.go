package httpapi

import (
	"encoding/json"
	"time"

	"github.com/heraldhq/herald"
)

// Endpoint health on the subscription (issue 24): the auto_disable body
// field and the health the GET shows.

// autoDisableDefault is the auto_disable value that goes back to the
// server's rule (null means never, RFC 7396 notwithstanding).
const autoDisableDefault = "default"

// decodeAutoDisable: absent or "default" follows the server's rule; null
// never auto-disables; an object sets the subscription's own rule.
func decodeAutoDisable(o object, s *herald.Subscription) error {
	raw, ok := o.fields["auto_disable"]
	if !ok {
		return nil
	}
	if isNull(raw) {
		s.AutoDisable = &herald.AutoDisable{} // never
		return nil
	}
	if raw[0] == '"' {
		var v string
		if json.Unmarshal(raw, &v) == nil && v == autoDisableDefault {
			return nil
		}
		return invalid("auto_disable", `must be an object, null (never) or "default"`)
	}
	ao, err := parseObject(raw, "auto_disable")
	if err != nil {
		return err
	}
	if err := ao.allow("consecutive_failures", "min_duration_s"); err != nil {
		return err
	}
	var failures, minS int64
	set, err := ao.integer("consecutive_failures", &failures)
	if err != nil {
		return err
	}
	if !set {
		return herald.FieldErrorf(herald.CodeMissingField, ao.at("consecutive_failures"),
			"%s is required (null auto_disable turns it off)", ao.at("consecutive_failures"))
	}
	if failures < 1 || failures > herald.MaxAutoDisableFailures {
		return invalid(ao.at("consecutive_failures"), "must be from 1 to %d (null auto_disable turns it off)", herald.MaxAutoDisableFailures)
	}
	maxS := int64(herald.MaxAutoDisableDuration / time.Second)
	if _, err := ao.integer("min_duration_s", &minS); err != nil {
		return err
	}
	if minS < 0 || minS > maxS {
		return invalid(ao.at("min_duration_s"), "must be from 0 to %d", maxS)
	}
	s.AutoDisable = &herald.AutoDisable{ConsecutiveFailures: int(failures), MinDurationS: minS}
	return nil
}

// autoDisableView is the auto_disable field: absent for the server's rule,
// null for never, the rule otherwise.
func autoDisableView(a *herald.AutoDisable) json.RawMessage {
	switch {
	case a == nil:
		return nil
	case a.Never():
		return json.RawMessage("null")
	}
	b, _ := json.Marshal(a) // two integers: cannot fail
	return b
}

// healthJSON is the health a subscription's GET shows.
type healthJSON struct {
	ConsecutiveFailures int      `json:"consecutive_failures"`
	FailingSince        *string  `json:"failing_since"`
	Attempts24h         int64    `json:"attempts_24h"`
	SuccessRate24h      *float64 `json:"success_rate_24h"`
	// AutoDisable is the rule in force for the subscription (its own or
	// the server's); null when it is never auto-disabled.
	AutoDisable *herald.AutoDisable `json:"auto_disable"`
}

func healthView(h *herald.SubscriptionHealth, rule *herald.AutoDisable) *healthJSON {
	v := &healthJSON{ConsecutiveFailures: h.ConsecutiveFailures, Attempts24h: h.Attempts24h,
		SuccessRate24h: h.SuccessRate24h}
	if h.FailingSince != nil {
		ts := timestamp(*h.FailingSince)
		v.FailingSince = &ts
	}
	v.AutoDisable = rule
	return v
}

// autoDisableRule is the rule in force for sub (herald.AutoDisableRule).
func (s *server) autoDisableRule(sub *herald.Subscription) *herald.AutoDisable {
	return herald.AutoDisableRule(s.cfg.AutoDisable, sub.AutoDisable)
}
