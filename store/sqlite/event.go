package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// EventInsertMany stores events and their deliveries in one transaction.
func (s *Store) EventInsertMany(ctx context.Context, params *store.EventInsertManyParams) ([]store.EventInsertResult, error) {
	var (
		out        []store.EventInsertResult
		moved      bool
		tokensGone bool
	)
	err := s.writeTx(ctx, "event insert many", func(tx queryer) error {
		// Under the single writer, like the versions below: a delete of
		// the token cannot commit between this read and the insert.
		for _, t := range params.Tokens {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM api_tokens WHERE hash = ? AND id = ?`,
				t.Hash, t.ID).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				tokensGone = true
				return nil // nothing written; the commit is empty
			}
		}
		if params.Versions != nil {
			// Under the single writer: no subscription change can commit
			// between this read and the insert.
			var v store.SubscriptionsVersions
			if err := tx.QueryRowContext(ctx, versionsSQL).Scan(&v.Subscriptions, &v.Pauses); err != nil {
				return err
			}
			if v != *params.Versions {
				moved = true
				return nil // nothing written; the commit is empty
			}
		}
		var err error
		out, err = insertEvents(ctx, tx, params.Events, params.Now)
		return err
	})
	if err != nil {
		return nil, err
	}
	if tokensGone {
		return nil, store.ErrTokenGone
	}
	if moved {
		return nil, store.ErrSubscriptionsMoved
	}
	return out, nil
}

// Rows per multi-row INSERT. A statement binds rows×columns parameters
// (SQLite allows 32766); 250 rows keeps both inserts well under that and
// most group commits in one or two statements.
const insertChunk = 250

// insertEvents is EventInsertMany inside an open transaction (also used by
// DeliveryCompleteMany for system events).
//
// Events and deliveries go in as multi-row INSERTs, insertChunk rows per
// statement: per-row statements spent most of their time in the driver
// (a cgo call, a context watcher and argument conversion per row), not in
// SQLite. INSERT … ON CONFLICT DO NOTHING RETURNING id, tenant names the
// events actually inserted; only their deliveries are written, and the few
// duplicates are answered with their stored delivery count. An event is
// its (id, tenant) pair throughout (store.EventKey).
func insertEvents(ctx context.Context, tx queryer, events []store.EventInsert, now time.Time) ([]store.EventInsertResult, error) {
	if len(events) == 0 {
		return []store.EventInsertResult{}, nil
	}
	out := make([]store.EventInsertResult, len(events))
	// first maps an event key to the index of its first occurrence: a
	// repeat inside one call is a duplicate of that one.
	first := make(map[store.EventKey]int, len(events))
	unique := make([]int, 0, len(events))
	for i, in := range events {
		k := store.EventKeyOf(in.Event)
		if _, ok := first[k]; ok {
			continue
		}
		first[k] = i
		unique = append(unique, i)
	}

	// Deliveries go only to subscriptions that exist and are not deleted
	// now. The transaction holds the single writer, so no delete can
	// commit between this read and the insert.
	live, err := liveSubscriptions(ctx, tx, events, unique)
	if err != nil {
		return nil, err
	}
	// kept counts the deliveries each event keeps (its delivery_count).
	kept := make(map[store.EventKey]int, len(unique))
	for _, i := range unique {
		n := 0
		for _, d := range events[i].Deliveries {
			if live[d.SubscriptionID] {
				n++
			}
		}
		kept[store.EventKeyOf(events[i].Event)] = n
	}

	inserted := make(map[store.EventKey]bool, len(unique))
	for lo := 0; lo < len(unique); lo += insertChunk {
		chunk := unique[lo:min(lo+insertChunk, len(unique))]
		if err := insertEventRows(ctx, tx, events, chunk, kept, inserted); err != nil {
			return nil, err
		}
	}

	var (
		dupIDs []any
		dls    []deliveryRow
	)
	nowMS := ms(now)
	for _, i := range unique {
		ev := events[i].Event
		if !inserted[store.EventKeyOf(ev)] {
			dupIDs = append(dupIDs, ev.ID)
			continue
		}
		var version any
		if ev.Version != nil {
			version = *ev.Version
		}
		for _, d := range events[i].Deliveries {
			if live[d.SubscriptionID] {
				dls = append(dls, deliveryRow{d: d, eventID: ev.ID, eventTenant: ev.Tenant, key: ev.Key, version: version})
			}
		}
	}
	// Publish positions (store/ordering.go): one bump of the counter for
	// the whole call, handed out in input order.
	var seq int64
	if len(dls) > 0 {
		if err := tx.QueryRowContext(ctx, `UPDATE meta SET value = value + ? WHERE key = 'delivery_seq' RETURNING value`,
			len(dls)).Scan(&seq); err != nil {
			return nil, fmt.Errorf("assigning publish positions: %w", err)
		}
		seq -= int64(len(dls))
	}
	for lo := 0; lo < len(dls); lo += insertChunk {
		if err := insertDeliveryRows(ctx, tx, dls[lo:min(lo+insertChunk, len(dls))], nowMS, seq+int64(lo)+1); err != nil {
			return nil, err
		}
	}

	// Delivery counts of events stored before this call, read by id: rows
	// of other tenants with the same id come along and are never used
	// (a duplicate is answered with its own tenant's figure only).
	stored := map[store.EventKey]int{}
	for lo := 0; lo < len(dupIDs); lo += insertChunk {
		ids := dupIDs[lo:min(lo+insertChunk, len(dupIDs))]
		in, args := inList(ids)
		rows, err := tx.QueryContext(ctx, `SELECT id, tenant, delivery_count FROM events WHERE id IN (`+in+`)`, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var k store.EventKey
			var n int
			if err := rows.Scan(&k.ID, &k.Tenant, &n); err != nil {
				rows.Close()
				return nil, err
			}
			stored[k] = n
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}

	for i, in := range events {
		id, k := in.Event.ID, store.EventKeyOf(in.Event)
		f := first[k]
		switch {
		case inserted[k] && f == i:
			out[i] = store.EventInsertResult{ID: id, DeliveryCount: kept[k], Dropped: store.DroppedDeliveries(in.Deliveries, live)}
		case inserted[k]:
			out[i] = store.EventInsertResult{ID: id, Duplicate: true, DeliveryCount: kept[k]}
		default:
			n, ok := stored[k]
			if !ok {
				return nil, fmt.Errorf("event %s neither inserted nor found", id)
			}
			out[i] = store.EventInsertResult{ID: id, Duplicate: true, DeliveryCount: n}
		}
	}
	return out, nil
}

// liveSubscriptions returns which of the subscriptions named by the
// deliveries of events[unique…] exist and are not deleted.
func liveSubscriptions(ctx context.Context, tx queryer, events []store.EventInsert, unique []int) (map[string]bool, error) {
	seen := map[string]bool{}
	var ids []any
	for _, i := range unique {
		for _, d := range events[i].Deliveries {
			if !seen[d.SubscriptionID] {
				seen[d.SubscriptionID] = true
				ids = append(ids, d.SubscriptionID)
			}
		}
	}
	return subscriptionsWhere(ctx, tx, "deleted_at IS NULL", ids)
}

// subscriptionsWhere returns which of ids name a subscription that meets
// cond (an SQL condition on subscriptions), reading insertChunk ids per
// statement.
func subscriptionsWhere(ctx context.Context, tx queryer, cond string, ids []any) (map[string]bool, error) {
	found := make(map[string]bool, len(ids))
	for lo := 0; lo < len(ids); lo += insertChunk {
		chunk := ids[lo:min(lo+insertChunk, len(ids))]
		in, args := inList(chunk)
		rows, err := tx.QueryContext(ctx, `SELECT id FROM subscriptions WHERE `+cond+` AND id IN (`+in+`)`, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			found[id] = true
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// insertEventRows inserts events[idx…] in one statement, each with the
// delivery count kept says, and marks the ids it inserted (the others
// already existed).
func insertEventRows(ctx context.Context, tx queryer, events []store.EventInsert, idx []int, kept map[store.EventKey]int, inserted map[store.EventKey]bool) error {
	const cols = 8
	var q strings.Builder
	q.Grow(128 + len(idx)*18)
	q.WriteString(`INSERT INTO events (id, type, key, version, data, delivery_count, created_at, tenant)
		SELECT * FROM (VALUES `)
	pad := valuesRows(&q, `(?,?,?,?,?,?,?,?)`, len(idx))
	q.WriteString(`) WHERE column1 IS NOT NULL ON CONFLICT (id, tenant) DO NOTHING RETURNING id, tenant`)
	args := make([]any, 0, (len(idx)+pad)*cols)
	for _, i := range idx {
		ev := events[i].Event
		var version any
		if ev.Version != nil {
			version = *ev.Version
		}
		args = append(args, ev.ID, ev.Type, ev.Key, version, []byte(store.RawJSON(ev.Data)),
			kept[store.EventKeyOf(ev)], ms(ev.CreatedAt), ev.Tenant)
	}
	args = padArgs(args, pad, cols)
	rows, err := tx.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return fmt.Errorf("inserting events: %w", err)
	}
	for rows.Next() {
		var k store.EventKey
		if err := rows.Scan(&k.ID, &k.Tenant); err != nil {
			rows.Close()
			return err
		}
		inserted[k] = true
	}
	if err := rows.Close(); err != nil {
		return err
	}
	return rows.Err()
}

// deliveryRow is one delivery to insert with the event fields it copies.
type deliveryRow struct {
	d           store.DeliveryInsert
	eventID     string
	eventTenant string
	key         string
	version     any
}

// insertDeliveryRows inserts dls in one statement, with publish positions
// seq, seq+1, … in order.
func insertDeliveryRows(ctx context.Context, tx queryer, dls []deliveryRow, nowMS, seq int64) error {
	const cols = 13
	var q strings.Builder
	q.Grow(220 + len(dls)*36)
	q.WriteString(`INSERT INTO deliveries (id, event_id, event_tenant, subscription_id, state, tier,
		next_attempt_at, event_key, event_version, lease_owner, lease_until, created_at, updated_at, seq)
		SELECT * FROM (VALUES `)
	pad := valuesRows(&q, `(?,?,?,?,?,0,?,?,?,?,?,?,?,?)`, len(dls))
	q.WriteString(`) WHERE column1 IS NOT NULL`)
	args := make([]any, 0, (len(dls)+pad)*cols)
	for n, r := range dls {
		// Leased at insert (direct dispatch): in_flight, as a claim would
		// leave it.
		state, owner, until := "pending", any(nil), any(nil)
		if r.d.LeaseOwner != "" {
			state, owner, until = "in_flight", r.d.LeaseOwner, ms(r.d.LeaseUntil)
		}
		args = append(args, r.d.ID, r.eventID, r.eventTenant, r.d.SubscriptionID, state, ms(r.d.NextAttemptAt), r.key, r.version,
			owner, until, nowMS, nowMS, seq+int64(n))
	}
	args = padArgs(args, pad, cols)
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		return fmt.Errorf("inserting deliveries: %w", err)
	}
	return nil
}

// EventGet returns an event and its deliveries.
func (s *Store) EventGet(ctx context.Context, params *store.EventGetParams) (*store.EventGetResult, error) {
	res := &store.EventGetResult{}
	err := s.readTx(ctx, "event get", func(tx queryer) error {
		ev, err := getEvent(ctx, tx, params)
		if err != nil {
			return err
		}
		res.Event = ev
		rows, err := tx.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries
			WHERE event_id = ? AND event_tenant = ? ORDER BY id`, ev.ID, ev.Tenant)
		if err != nil {
			return err
		}
		res.Deliveries, err = scanDeliveries(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

const eventColumns = `id, type, key, version, data, created_at, tenant`

func scanEvent(row scanner) (*herald.Event, error) {
	var (
		ev        herald.Event
		version   sql.NullInt64
		data      []byte
		createdAt int64
	)
	if err := row.Scan(&ev.ID, &ev.Type, &ev.Key, &version, &data, &createdAt, &ev.Tenant); err != nil {
		return nil, err
	}
	if version.Valid {
		v := version.Int64
		ev.Version = &v
	}
	ev.Data = data
	ev.CreatedAt = fromMS(createdAt)
	return &ev, nil
}

func getEvent(ctx context.Context, q queryer, params *store.EventGetParams) (*herald.Event, error) {
	if !params.AnyTenant {
		ev, err := scanEvent(q.QueryRowContext(ctx, `SELECT `+eventColumns+` FROM events WHERE id = ? AND tenant = ?`,
			params.ID, params.Tenant))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, herald.NotFoundf("event %s not found", params.ID)
		}
		return ev, err
	}
	rows, err := q.QueryContext(ctx, `SELECT `+eventColumns+` FROM events WHERE id = ? ORDER BY tenant`, params.ID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var found []*herald.Event
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		found = append(found, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return store.EventOne(params.ID, found)
}
