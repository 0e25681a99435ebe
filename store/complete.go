package store

import (
	"errors"
	"fmt"

	"github.com/heraldhq/herald"
)

// OutcomeChunks splits outcomes, in order, into consecutive chunks with no
// delivery id twice in a chunk and at most max outcomes each (max <= 0: no
// cap). Backends apply a chunk with set-based statements, where a repeated
// id would make the result depend on the database's choice of row; chunk
// by chunk, an outcome sees the state an earlier outcome for the same
// delivery left (usually: its lease is gone, so it is stale), as the
// contract's one-by-one order requires.
func OutcomeChunks(outcomes []DeliveryOutcome, max int) [][]DeliveryOutcome {
	var out [][]DeliveryOutcome
	seen := make(map[string]bool, len(outcomes))
	start := 0
	for i, o := range outcomes {
		if seen[o.DeliveryID] || (max > 0 && i-start == max) {
			out = append(out, outcomes[start:i])
			start = i
			clear(seen)
		}
		seen[o.DeliveryID] = true
	}
	if start < len(outcomes) {
		out = append(out, outcomes[start:])
	}
	return out
}

// Outcome rules, the same for every backend (DeliveryCompleteMany):
//
//   - An outcome is valid only as DeliveryOutcome describes it
//     (OutcomesValidate). One invalid outcome refuses the whole call, before
//     anything is written, with an *OutcomeError (errors.Is
//     ErrOutcomeInvalid): a caller's bug, not a store failure, so it is
//     never herald.ErrStoreUnavailable and retrying the same batch fails
//     the same way. A caller that splits a failed batch finds the bad
//     outcome by OutcomeError.Index.
//   - An outcome whose delivery does not exist (retention deleted it, or
//     the id was never stored) records no attempt — there is no delivery to
//     attach it to, and a stray attempt row would never be deleted by
//     retention's per-delivery sweep — and is reported in Stale like any
//     outcome whose lease is gone; the rest of the call applies.
//   - Every other outcome records its attempt; it changes the delivery's
//     state only while the delivery is in_flight under the outcome's
//     LeaseOwner (Applied), otherwise it is Stale.

// ErrOutcomeInvalid is what every *OutcomeError matches with errors.Is.
var ErrOutcomeInvalid = errors.New("invalid delivery outcome")

// OutcomeError says which outcome of a DeliveryCompleteMany call broke
// which rule.
type OutcomeError struct {
	// Index is the outcome's position in DeliveryCompleteManyParams.Outcomes.
	Index      int
	DeliveryID string
	// Reason is the rule broken, in words.
	Reason string
}

func (e *OutcomeError) Error() string {
	return fmt.Sprintf("%s %d (delivery %q): %s", ErrOutcomeInvalid, e.Index, e.DeliveryID, e.Reason)
}

// Unwrap makes errors.Is(err, ErrOutcomeInvalid) true.
func (e *OutcomeError) Unwrap() error { return ErrOutcomeInvalid }

// OutcomesValidate checks outcomes against DeliveryOutcome's rules and
// returns an *OutcomeError for the first that breaks one: a delivery id and
// a lease owner are set; the new state is delivered, dead or pending; a
// pending one (a retry) has a NextAttemptAt, and only a pending one does;
// tiers are not negative and the attempt is numbered from 1. Backends call
// it first in DeliveryCompleteMany.
func OutcomesValidate(outcomes []DeliveryOutcome) error {
	for i := range outcomes {
		if reason := outcomeInvalid(&outcomes[i]); reason != "" {
			return &OutcomeError{Index: i, DeliveryID: outcomes[i].DeliveryID, Reason: reason}
		}
	}
	return nil
}

func outcomeInvalid(o *DeliveryOutcome) string {
	switch {
	case o.DeliveryID == "":
		return "no delivery id"
	case o.LeaseOwner == "":
		return "no lease owner"
	case o.Tier < 0 || o.Attempt.Tier < 0:
		return fmt.Sprintf("negative tier (%d, attempt %d)", o.Tier, o.Attempt.Tier)
	case o.Attempt.N < 1:
		return fmt.Sprintf("attempt number %d (they start at 1)", o.Attempt.N)
	}
	switch o.State {
	case herald.DeliveryDelivered, herald.DeliveryDead:
		if o.NextAttemptAt != nil {
			return fmt.Sprintf("state %s with a next attempt time (only a retry has one)", o.State)
		}
	case herald.DeliveryPending:
		if o.NextAttemptAt == nil || o.NextAttemptAt.IsZero() {
			return "state pending (a retry) without a next attempt time"
		}
	default:
		return fmt.Sprintf("new state %q (want delivered, pending or dead)", o.State)
	}
	return ""
}

// Record adds the outcomes of one chunk to r in input order: those whose
// delivery ids are in applied count in Applied, the others (lease gone, or
// delivery missing) are listed in Stale.
func (r *DeliveryCompleteManyResult) Record(chunk []DeliveryOutcome, applied map[string]bool) {
	for _, o := range chunk {
		if applied[o.DeliveryID] {
			r.Applied++
		} else {
			r.Stale = append(r.Stale, o.DeliveryID)
		}
	}
}
