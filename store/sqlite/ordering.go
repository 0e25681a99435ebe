package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Per-key ordering (fifo, latest): the claim path of ordered
// subscriptions, and the key-state upkeep of completion, release and
// rescue. The rules are store/ordering.go's; PlanKey decides, this file
// reads and writes. SQLite has one writer, so the claim transaction alone
// serializes every decision about a key.

// orderedScanPage is how many due rows an ordered claim reads per query.
const orderedScanPage = 500

// orderedClaim is the state of one DeliveryClaim's ordered part: the keys
// it already decided (each at most once per claim).
type orderedClaim struct {
	params *store.DeliveryClaimParams
	now    int64
	done   map[string]bool // subscription id + "\x00" + key
}

func newOrderedClaim(params *store.DeliveryClaimParams) *orderedClaim {
	return &orderedClaim{params: params, now: ms(params.Now), done: map[string]bool{}}
}

// pickDue picks up to n due deliveries of candidate c for the claim:
// unordered subscriptions through the plain pick, fifo and latest ones
// through the per-key path. The caller leases what it returns.
func pickDue(ctx context.Context, tx queryer, pick *sql.Stmt, ordered **orderedClaim,
	params *store.DeliveryClaimParams, c *claimCandidate, n int) ([]string, error) {
	if c.ordering != herald.OrderingFIFO && c.ordering != herald.OrderingLatest {
		return pickIDs(ctx, pick, params.Tier, c.id, ms(params.Now), n)
	}
	if *ordered == nil {
		*ordered = newOrderedClaim(params)
	}
	return (*ordered).pick(ctx, tx, c, n)
}

// pick chooses up to n deliveries of the ordered subscription c in the
// claimed tier: keyless ones as they come, and for each key met among the
// due rows (oldest due first) the one delivery PlanKey allows, applying
// its skips and supersedes; it takes the key (holder) for what it
// returns, which the caller leases in the same transaction. Stuck keys cost a row read each; they never
// hold back other keys.
func (o *orderedClaim) pick(ctx context.Context, tx queryer, c *claimCandidate, n int) ([]string, error) {
	var (
		out      []string
		afterAt  int64 = -1 << 62
		afterID  string
		interval = time.Duration(c.keyIntervalMS) * time.Millisecond
		tier     = o.params.Tier
	)
	for len(out) < n {
		rows, err := tx.QueryContext(ctx, `SELECT id, event_key, next_attempt_at FROM deliveries
			WHERE state = 'pending' AND tier = ? AND subscription_id = ? AND next_attempt_at <= ?
			  AND (next_attempt_at > ? OR (next_attempt_at = ? AND id > ?))
			ORDER BY next_attempt_at, id LIMIT ?`, tier, c.id, o.now, afterAt, afterAt, afterID, orderedScanPage)
		if err != nil {
			return nil, err
		}
		type due struct {
			id, key string
			at      int64
		}
		var page []due
		for rows.Next() {
			var d due
			if err := rows.Scan(&d.id, &d.key, &d.at); err != nil {
				rows.Close()
				return nil, err
			}
			page = append(page, d)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		// The page is decided in chunks of about as many keys as the
		// claim still needs: each chunk reads its keys' states and
		// deliveries with two statements and writes its skips, supersedes
		// and holders with three, instead of four or five statements per
		// key. Keys are independent, so reading a chunk before writing it
		// decides exactly as key by key.
		for i := 0; i < len(page) && len(out) < n; {
			want := max(n-len(out), 16)
			var keys []string
			inChunk := map[string]bool{}
			j := i
			for ; j < len(page) && len(keys) < want; j++ {
				if key := page[j].key; key != "" && !o.done[c.id+"\x00"+key] && !inChunk[key] {
					inChunk[key] = true
					keys = append(keys, key)
				}
			}
			states, dls, err := readKeysBatch(ctx, tx, c.id, keys)
			if err != nil {
				return nil, err
			}
			var w keyWrites
			for _, d := range page[i:j] {
				if len(out) >= n {
					break
				}
				if d.key == "" {
					out = append(out, d.id)
					continue
				}
				k := c.id + "\x00" + d.key
				if o.done[k] {
					continue
				}
				o.done[k] = true
				st := states[d.key]
				if st == nil {
					st = &store.KeyState{}
				}
				if id := o.planKey(c, d.key, st, dls[d.key], interval, &w); id != "" {
					out = append(out, id)
				}
			}
			if err := o.applyKeyWrites(ctx, tx, c, &w); err != nil {
				return nil, err
			}
			i = j
		}
		if len(page) < orderedScanPage {
			break
		}
		last := page[len(page)-1]
		afterAt, afterID = last.at, last.id
	}
	return out, nil
}

// keyWrites are the writes one chunk of keys decided.
type keyWrites struct {
	skip, supersede []string
	// holders: key and the delivery it now holds for (claimed now).
	holderKeys, holderIDs []string
}

// planKey plans one key from its state and deliveries, records its skips,
// supersedes and (when claimable in this tier now) its new holder in w,
// and returns the delivery to claim or "".
func (o *orderedClaim) planKey(c *claimCandidate, key string, st *store.KeyState, rows []store.KeyDelivery,
	interval time.Duration, w *keyWrites) string {
	plan := store.PlanKey(c.ordering, interval, st, rows, o.params.Now)
	w.skip = append(w.skip, plan.Skip...)
	w.supersede = append(w.supersede, plan.Supersede...)
	if !plan.Claimable(o.params.Tier, o.params.Now) {
		return ""
	}
	// The caller leases plan.Next in this transaction; the key records it
	// as its holder now.
	w.holderKeys, w.holderIDs = append(w.holderKeys, key), append(w.holderIDs, plan.Next)
	return plan.Next
}

// applyKeyWrites applies a chunk's decisions.
func (o *orderedClaim) applyKeyWrites(ctx context.Context, tx queryer, c *claimCandidate, w *keyWrites) error {
	if err := finishUnsent(ctx, tx, herald.DeliverySkipped, w.skip, o.now); err != nil {
		return err
	}
	if err := finishUnsent(ctx, tx, herald.DeliverySuperseded, w.supersede, o.now); err != nil {
		return err
	}
	if len(w.holderKeys) == 0 {
		return nil
	}
	var q strings.Builder
	q.WriteString(`INSERT INTO delivery_keys (subscription_id, event_key, holder, holder_owner,
			holder_until, last_sent_at) VALUES `)
	args := make([]any, 0, 6*len(w.holderKeys))
	sentAt := ms(o.params.KeySentAt())
	for i, key := range w.holderKeys {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(`(?,?,?,?,?,?)`)
		args = append(args, c.id, key, w.holderIDs[i], o.params.LeaseOwner, c.lease, sentAt)
	}
	q.WriteString(` ON CONFLICT (subscription_id, event_key) DO UPDATE SET holder = excluded.holder,
			holder_owner = excluded.holder_owner, holder_until = excluded.holder_until,
			last_sent_at = excluded.last_sent_at`)
	_, err := tx.ExecContext(ctx, q.String(), args...)
	return err
}

// readKeysBatch reads the states and unfinished deliveries (in publish
// order) of several keys of one subscription: readKeyState and
// readKeyDeliveries for many keys in two statements. Keys without a state
// row are absent from the first map.
func readKeysBatch(ctx context.Context, tx queryer, subID string, keys []string) (map[string]*store.KeyState, map[string][]store.KeyDelivery, error) {
	states := map[string]*store.KeyState{}
	dls := map[string][]store.KeyDelivery{}
	if len(keys) == 0 {
		return states, dls, nil
	}
	args := append([]any{subID}, anySlice(keys)...)
	rows, err := tx.QueryContext(ctx, `SELECT event_key, `+keyStateColumns+`
		FROM delivery_keys WHERE subscription_id = ? AND event_key IN (`+placeholders(len(keys))+`)`, args...)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var key string
		st, err := scanKeyState(rows, &key)
		if err != nil {
			rows.Close()
			return nil, nil, err
		}
		states[key] = st
	}
	if err := rows.Close(); err != nil {
		return nil, nil, err
	}
	rows, err = tx.QueryContext(ctx, `SELECT event_key, `+keyDeliveryColumns+`
		FROM deliveries WHERE subscription_id = ? AND event_key IN (`+placeholders(len(keys))+`) AND event_key <> ''
		  AND state IN ('pending', 'in_flight')
		ORDER BY event_key, seq, created_at, id`, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		d, err := scanKeyDelivery(rows, &key)
		if err != nil {
			return nil, nil, err
		}
		dls[key] = append(dls[key], d)
	}
	return states, dls, rows.Err()
}

// finishUnsent moves pending deliveries to skipped or superseded.
func finishUnsent(ctx context.Context, tx queryer, state herald.DeliveryState, ids []string, now int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = ?, next_attempt_at = NULL, updated_at = ?
		WHERE state = 'pending' AND id IN (`+placeholders(len(ids))+`)`,
		append([]any{string(state), now}, anySlice(ids)...)...)
	return err
}

// keyStateColumns are the columns of delivery_keys scanKeyState reads.
const keyStateColumns = `holder, last_version, last_pos_seq, last_pos_at, last_pos_id, last_sent_at`

// readKeyState reads a key's state; a key never claimed has a zero state.
func readKeyState(ctx context.Context, q queryer, subID, key string) (*store.KeyState, error) {
	st, err := scanKeyState(q.QueryRowContext(ctx, `SELECT `+keyStateColumns+`
		FROM delivery_keys WHERE subscription_id = ? AND event_key = ?`, subID, key), nil)
	if errors.Is(err, sql.ErrNoRows) {
		return &store.KeyState{}, nil
	}
	return st, err
}

// scanKeyState scans keyStateColumns, preceded by the key when key is not
// nil.
func scanKeyState(row scanner, key *string) (*store.KeyState, error) {
	var (
		holder, posID      sql.NullString
		version, posAt, at sql.NullInt64
		posSeq             int64
	)
	dest := []any{&holder, &version, &posSeq, &posAt, &posID, &at}
	if key != nil {
		dest = append([]any{key}, dest...)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	st := &store.KeyState{Held: holder.Valid, LastSentAt: fromNullMS(at), LastPosSeq: posSeq, LastPosID: posID.String}
	if version.Valid {
		v := version.Int64
		st.LastVersion = &v
	}
	if posAt.Valid {
		st.LastPosAt = fromMS(posAt.Int64)
	}
	return st, nil
}

// keyDeliveryColumns are the columns of deliveries scanKeyDelivery reads.
const keyDeliveryColumns = `id, state, tier, next_attempt_at, event_version, seq, created_at`

// readKeyDeliveries reads a key's unfinished deliveries in publish order
// (index deliveries_key_order).
func readKeyDeliveries(ctx context.Context, q queryer, subID, key string) ([]store.KeyDelivery, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+keyDeliveryColumns+`
		FROM deliveries WHERE subscription_id = ? AND event_key = ? AND event_key <> ''
		  AND state IN ('pending', 'in_flight')
		ORDER BY seq, created_at, id`, subID, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.KeyDelivery
	for rows.Next() {
		d, err := scanKeyDelivery(rows, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// scanKeyDelivery scans keyDeliveryColumns, preceded by the key when key is
// not nil.
func scanKeyDelivery(row scanner, key *string) (store.KeyDelivery, error) {
	var (
		d         store.KeyDelivery
		state     string
		next, ver sql.NullInt64
		created   int64
	)
	dest := []any{&d.ID, &state, &d.Tier, &next, &ver, &d.Seq, &created}
	if key != nil {
		dest = append([]any{key}, dest...)
	}
	if err := row.Scan(dest...); err != nil {
		return d, err
	}
	d.State, d.NextAttemptAt, d.CreatedAt = herald.DeliveryState(state), fromNullMS(next), fromMS(created)
	if ver.Valid {
		v := ver.Int64
		d.Version = &v
	}
	return d, nil
}

// keyComplete frees the key held by an applied outcome's delivery and,
// when it was delivered, raises the key's last delivered version (never
// lowers it) or publish position (seq, created_at, id). Keys that were
// never claimed (unordered subscriptions) have no row: the update matches
// nothing.
func keyComplete(ctx context.Context, tx queryer, id, owner string, delivered bool) error {
	// ?1: delivered. newer: d is a delivered versionless delivery after the
	// key's last position (row values compare left to right).
	const newer = `?1 AND d.event_version IS NULL
		AND (last_pos_id IS NULL OR (d.seq, d.created_at, d.id) > (last_pos_seq, last_pos_at, last_pos_id))`
	_, err := tx.ExecContext(ctx, `UPDATE delivery_keys SET holder = NULL, holder_owner = NULL, holder_until = NULL,
			last_version = CASE WHEN ?1 AND d.event_version IS NOT NULL
				THEN max(COALESCE(last_version, d.event_version), d.event_version) ELSE last_version END,
			last_pos_seq = CASE WHEN `+newer+` THEN d.seq ELSE last_pos_seq END,
			last_pos_at = CASE WHEN `+newer+` THEN d.created_at ELSE last_pos_at END,
			last_pos_id = CASE WHEN `+newer+` THEN d.id ELSE last_pos_id END
		FROM (SELECT id, subscription_id, event_key, event_version, seq, created_at FROM deliveries WHERE id = ?2) AS d
		WHERE delivery_keys.subscription_id = d.subscription_id AND delivery_keys.event_key = d.event_key
		  AND delivery_keys.holder = d.id AND delivery_keys.holder_owner = ?3`,
		delivered, id, owner)
	return err
}

// keysReleaseOwner frees the keys held by deliveries released by owner.
func keysRelease(ctx context.Context, tx queryer, ids []string, owner string) error {
	_, err := tx.ExecContext(ctx, `UPDATE delivery_keys SET holder = NULL, holder_owner = NULL, holder_until = NULL
		WHERE holder IS NOT NULL AND holder_owner = ? AND holder IN (`+placeholders(len(ids))+`)`,
		append([]any{owner}, anySlice(ids)...)...)
	return err
}

// keysRescue frees the keys whose holder's lease ends before before (and
// that owner holds, if set), with the rescue that makes those deliveries
// pending again.
func keysRescue(ctx context.Context, tx queryer, before int64, owner string) error {
	_, err := tx.ExecContext(ctx, `UPDATE delivery_keys SET holder = NULL, holder_owner = NULL, holder_until = NULL
		WHERE holder IS NOT NULL AND holder_until < ? AND (? = '' OR holder_owner = ?)`, before, owner, owner)
	return err
}

func msDuration(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// orderedPredicate selects fifo and latest subscriptions (alias s).
const orderedPredicate = `(s.ordering IN ('fifo', 'latest'))`

// orderedNextDue is DeliveryNextDue for ordered subscriptions (throttled
// ones are throttle.go's): a due delivery whose key is blocked is not a
// reason to wake — the completion that frees the key wakes the engine —
// so it counts keyless deliveries, keyed ones that mature after now, and
// the end of running key intervals.
func orderedNextDue(ctx context.Context, q queryer, tier int, now int64) (sql.NullInt64, error) {
	var next sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT MIN(t) FROM (
			SELECT MIN(
				-- A keyless delivery among the first due ones (MIN over
				-- NULLs is NULL: COALESCE with the other probe).
				COALESCE((SELECT MIN(w.next_attempt_at) FROM (SELECT d.next_attempt_at, d.event_key FROM deliveries d
					WHERE d.state = 'pending' AND d.tier = ?1 AND d.subscription_id = s.id
					ORDER BY d.next_attempt_at LIMIT ?3) w WHERE w.event_key = ''), 1 << 62),
				-- The first delivery maturing after now.
				COALESCE((SELECT d.next_attempt_at FROM deliveries d
					WHERE d.state = 'pending' AND d.tier = ?1 AND d.subscription_id = s.id AND d.next_attempt_at > ?2
					ORDER BY d.next_attempt_at LIMIT 1), 1 << 62)) AS t
			FROM subscriptions s WHERE s.state = 'enabled' AND s.deleted_at IS NULL
				AND `+orderedPredicate+` AND NOT `+throttledPredicate+`
			UNION ALL
			SELECT MIN(k.last_sent_at + s.key_interval_ms) FROM delivery_keys k
				JOIN subscriptions s ON s.id = k.subscription_id
			WHERE s.key_interval_ms > 0 AND k.holder IS NULL AND k.last_sent_at + s.key_interval_ms > ?2
				AND s.state = 'enabled' AND s.deleted_at IS NULL AND `+orderedPredicate+`
				AND NOT `+throttledPredicate+`)`, tier, now, store.OrderedNextDueWindow).Scan(&next)
	if next.Valid && next.Int64 == 1<<62 {
		next = sql.NullInt64{}
	}
	return next, err
}
