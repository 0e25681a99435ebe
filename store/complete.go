package store

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
