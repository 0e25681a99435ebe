package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// tokenGuard is how an event insert spells its publishing-token check
// (store.EventInsertManyParams.Tokens), chosen by how many tokens the
// publish carries.
type tokenGuard int

const (
	// tokensNone: nothing to check (an admin, dev or system publish). tok
	// is the constant true and the statement takes no token parameters:
	// the general form's join and count over empty arrays cost the backend
	// 46 µs of a 440 µs one-event insert at 200/s (docs/benchmarks.md,
	// "2026-12-07 (seventh stop)").
	tokensNone tokenGuard = iota
	// tokensOne: an EXISTS on the token's primary key. A one-event publish
	// with a publishing token carries one, and the general form cost the
	// backend 21–54 µs more per one-event insert at 200/s
	// (docs/benchmarks.md, "The token check of a one-event insert").
	tokensOne
	// tokensMany: the arrays of hashes and ids joined with api_tokens and
	// counted.
	tokensMany
)

// tokenGuardOf returns the guard for n tokens.
func tokenGuardOf(n int) tokenGuard {
	switch n {
	case 0:
		return tokensNone
	case 1:
		return tokensOne
	}
	return tokensMany
}

// insertGuardSQL is the first CTEs of every event insert: cur, the guards —
// tok, the publishing tokens (parameters hashes and ids, text arrays; not
// taken with tokensNone) are all still stored, and ok, tok and the
// fan-out cache's versions (parameters version and pauses; both NULL: no
// check) are the store's — and live, the named subscriptions ($9) that
// exist, locked FOR KEY SHARE in id order (insertManySQL). oneDelivery
// names at most one subscription, $9 as a scalar (NULL: none): no sort,
// and an index probe rather than an array scan.
func insertGuardSQL(version, pauses, hashes, ids string, tokens tokenGuard, oneDelivery bool) string {
	versions := `coalesce((SELECT v.version = ` + version + `::bigint AND v.pauses_version = ` + pauses + `::bigint
		FROM subscriptions_version v), false) OR ` + version + `::bigint IS NULL`
	cur := `SELECT ` + versions + ` AS ok, true AS tok`
	if tokens != tokensNone {
		tok := `(SELECT count(*) FROM api_tokens t
		WHERE (t.hash, t.id) IN (SELECT * FROM unnest(` + hashes + `::text[], ` + ids + `::text[])))
		= coalesce(cardinality(` + hashes + `::text[]), 0)`
		if tokens == tokensOne {
			tok = `EXISTS (SELECT 1 FROM api_tokens t
		WHERE t.hash = (` + hashes + `::text[])[1] AND t.id = (` + ids + `::text[])[1])`
		}
		cur = `SELECT (` + versions + `) AND tk.tok AS ok, tk.tok
	FROM (SELECT ` + tok + ` AS tok) tk`
	}
	live := `s.id = ANY($9::text[]) AND s.deleted_at IS NULL AND (SELECT ok FROM cur)
	ORDER BY s.id`
	if oneDelivery {
		live = `s.id = $9::text AND s.deleted_at IS NULL AND (SELECT ok FROM cur)`
	}
	return `cur AS (
	` + cur + `
), live AS (
	SELECT s.id FROM subscriptions s
	WHERE ` + live + `
	FOR KEY SHARE
)`
}

// insertDeliveryColumns are the columns both event inserts fill in deliveries.
const insertDeliveryColumns = `id, event_id, event_tenant, subscription_id, state, tier, next_attempt_at,
		event_key, event_version, lease_owner, lease_until, created_at, updated_at`

// insertManySQL stores events and, in a data-modifying CTE, the deliveries
// of those that were not duplicates — one statement, one round trip, atomic
// on its own. It returns the keys (id, tenant) of the events actually
// inserted (gone NULL) and the named subscriptions that are deleted or
// unknown (id NULL). An event is its (id, tenant) pair throughout
// (store.EventKey).
//
// Deliveries go only to live subscriptions (live), whose rows it locks FOR
// KEY SHARE until commit, in id order. SubscriptionDelete locks the row FOR
// UPDATE first, which conflicts with that lock and nothing weaker: a delete
// that comes first makes live (re-checked on the newest row version under
// READ COMMITTED) leave the subscription out, and one that comes second
// waits for this commit, so its cancellation sees the new deliveries.
// Pauses, disables and updates take FOR NO KEY UPDATE, which does not
// conflict with KEY SHARE: publishing never waits for them.
//
// With the fan-out cache's versions ($16, $17; store.EventInsertManyParams
// .Versions) it first compares them with subscriptions_version, in the
// statement's own snapshot: when either differs it locks and inserts
// nothing and answers one row of NULLs (readInserted: moved). Both NULL:
// no check. The comparison sees every subscription change committed before
// the statement began, which is what the separate version read before it
// used to see.
//
// The deliveries are inserted in input order (ORDER BY the array position),
// so the publish positions their seq default takes from deliveries_seq
// follow the call's order (store/ordering.go): the default is evaluated
// above the sorted SELECT, row by row.
//
// tokens spells the token guard; with tokensNone the statement takes 17
// parameters, not 19 (eventBatch.manyStatement).
func insertManySQL(tokens tokenGuard) string {
	return `
WITH ` + insertGuardSQL("$16", "$17", "$18", "$19", tokens, false) + `, d AS (
	SELECT d.* FROM unnest($7::text[], $8::text[], $9::text[], $11::timestamptz[], $12::text[], $13::timestamptz[],
		$15::text[])
		WITH ORDINALITY AS d(id, event_id, subscription_id, next_attempt_at, lease_owner, lease_until, event_tenant, pos)
	WHERE d.subscription_id IN (SELECT id FROM live)
), counts AS (
	SELECT event_id, event_tenant, count(*)::int AS n FROM d GROUP BY event_id, event_tenant
), ins AS (
	INSERT INTO events (id, type, key, version, data, created_at, delivery_count, tenant)
	SELECT e.id, e.type, e.key, e.version, e.data::json, e.created_at, coalesce(c.n, 0), e.tenant
	FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::timestamptz[], $14::text[])
		AS e(id, type, key, version, data, created_at, tenant)
	LEFT JOIN counts c ON c.event_id = e.id AND c.event_tenant = e.tenant
	WHERE (SELECT ok FROM cur)
	ON CONFLICT (id, tenant) DO NOTHING
	RETURNING id, tenant, key, version
), dl AS (
	INSERT INTO deliveries (` + insertDeliveryColumns + `)
	SELECT d.id, d.event_id, d.event_tenant, d.subscription_id,
		CASE WHEN d.lease_owner IS NULL THEN 'pending' ELSE 'in_flight' END, 0, d.next_attempt_at,
		ins.key, ins.version, d.lease_owner, d.lease_until, $10, $10
	FROM d JOIN ins ON ins.id = d.event_id AND ins.tenant = d.event_tenant
	ORDER BY d.pos
)
SELECT id, tenant, NULL::text AS gone, NULL::boolean AS tok FROM ins
UNION ALL
SELECT NULL, NULL, x.id, NULL FROM (SELECT DISTINCT unnest($9::text[]) AS id) x
WHERE x.id NOT IN (SELECT id FROM live) AND (SELECT ok FROM cur)
UNION ALL
SELECT NULL, NULL, NULL, tok FROM cur WHERE NOT ok`
}

// insertOneSQL is insertManySQL for a call that stores one event (its
// repeats within the call aside): the common case at steady rates, where
// nearly every group commit holds one event (issue 26: at 200/s, 3,977
// commits for 4,000 events). The same rules (live, the versions guard, ON
// CONFLICT, deliveries in input order) with the event's columns as scalars
// ($1–$7) and its deliveries as arrays ($8–$12): no join, aggregate or
// DISTINCT to build and tear down. In a one-connection loop of one-event
// commits it costs the backend 9–14% less CPU than insertManySQL
// (docs/benchmarks.md, issue 26). It answers the inserted event's key
// (gone NULL), then one row per live subscription (the third column; the
// caller derives the gone ones from those it named), or one row of NULLs
// when the guard failed (readInsertedOne).
//
// oneDelivery spells it for at most one delivery, the usual fan-out of
// one: the delivery's columns are scalars ($8–$12, NULL when there is
// none; eventBatch.oneDelivery) and live is its subscription, with no
// arrays to encode and decode and no unnest, semi-join, sort or count;
// 50 µs less backend CPU of a ~430 µs insert at 200/s (docs/benchmarks.md,
// "2026-12-07 (seventh stop)"). tokens spells the token guard; with
// tokensNone the statement takes 15 parameters, not 17
// (eventBatch.oneStatement).
func insertOneSQL(tokens tokenGuard, oneDelivery bool) string {
	deliveries := `, d AS (
	SELECT d.* FROM unnest($8::text[], $9::text[], $10::timestamptz[], $11::text[], $12::timestamptz[])
		WITH ORDINALITY AS d(id, subscription_id, next_attempt_at, lease_owner, lease_until, pos)
	WHERE d.subscription_id IN (SELECT id FROM live)
)`
	count, rows := `(SELECT count(*) FROM d)`, `SELECT d.id, ins.id, ins.tenant, d.subscription_id,
		CASE WHEN d.lease_owner IS NULL THEN 'pending' ELSE 'in_flight' END, 0, d.next_attempt_at,
		ins.key, ins.version, d.lease_owner, d.lease_until, $13, $13
	FROM ins, d
	ORDER BY d.pos`
	if oneDelivery {
		deliveries, count = "", `(SELECT count(*) FROM live)`
		rows = `SELECT $8::text, ins.id, ins.tenant, live.id,
		CASE WHEN $11::text IS NULL THEN 'pending' ELSE 'in_flight' END, 0, $10::timestamptz,
		ins.key, ins.version, $11::text, $12::timestamptz, $13, $13
	FROM ins, live`
	}
	return `
WITH ` + insertGuardSQL("$14", "$15", "$16", "$17", tokens, oneDelivery) + deliveries + `, ins AS (
	INSERT INTO events (id, type, key, version, data, created_at, delivery_count, tenant)
	SELECT $1, $2, $3, $4, $5::json, $6, ` + count + `, $7
	WHERE (SELECT ok FROM cur)
	ON CONFLICT (id, tenant) DO NOTHING
	RETURNING id, tenant, key, version
), dl AS (
	INSERT INTO deliveries (` + insertDeliveryColumns + `)
	` + rows + `
)
SELECT id, tenant, NULL::text AS live, NULL::boolean AS tok FROM ins
UNION ALL
SELECT NULL, NULL, id, NULL FROM live
UNION ALL
SELECT NULL, NULL, NULL, tok FROM cur WHERE NOT ok`
}

// insertManySQLs and insertOneSQLs are the statements' spellings, by
// tokenGuard and, for one event, by whether it has at most one delivery
// (index 1) or any number (index 0).
var (
	insertManySQLs = [...]string{tokensNone: insertManySQL(tokensNone), tokensOne: insertManySQL(tokensOne),
		tokensMany: insertManySQL(tokensMany)}
	insertOneSQLs = [...][2]string{
		tokensNone: {insertOneSQL(tokensNone, false), insertOneSQL(tokensNone, true)},
		tokensOne:  {insertOneSQL(tokensOne, false), insertOneSQL(tokensOne, true)},
		tokensMany: {insertOneSQL(tokensMany, false), insertOneSQL(tokensMany, true)},
	}
)

// readInsertedOne reads insertOneSQL's answer as readInserted reads
// insertManySQL's: a named subscription is gone when no live row names
// it (subs, the deliveries' subscription ids), unless the guard failed.
func readInsertedOne(rows pgx.Rows, subs []string) (*inserted, error) {
	ins := &inserted{isNew: map[store.EventKey]bool{}, gone: map[string]bool{}}
	live := make(map[string]bool, len(subs))
	var newID, newTenant, liveID *string
	var tok *bool
	if _, err := pgx.ForEachRow(rows, []any{&newID, &newTenant, &liveID, &tok}, func() error {
		switch {
		case newID != nil:
			ins.isNew[store.EventKey{ID: *newID, Tenant: *newTenant}] = true
		case liveID != nil:
			live[*liveID] = true
		default:
			ins.moved = true
			ins.tokensGone = tok != nil && !*tok
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if !ins.moved {
		for _, id := range subs {
			if !live[id] {
				ins.gone[id] = true
			}
		}
	}
	return ins, nil
}

// eventBatch is EventInsertMany's input laid out as column arrays for
// insertManySQL, with the bookkeeping to answer each input in order.
type eventBatch struct {
	// first maps each input index to the index of the first input with the
	// same event key (itself for a first occurrence).
	first []int
	// ids and tenants are the keys of first occurrences, in input order
	// (the same slices args passes to the insert).
	ids, tenants []string
	// subs are the deliveries' subscription ids, in order.
	subs []string
	// args are insertManySQL's arguments, and one insertOneSQL's when the
	// batch stores one event (nil otherwise), both with the token
	// parameters last (manyStatement and oneStatement leave them out for
	// tokensNone).
	args, one []any
	// oneDelivery is the columns of one's delivery ($8–$12) as
	// insertOneSQL's one-delivery form takes them: scalars, all NULL when
	// the event has none (set when it has at most one).
	oneDelivery [5]any
	// tokens is the token guard's spelling (guard).
	tokens tokenGuard
	// deliveries is how many delivery rows the insert carries.
	deliveries int
}

func newEventBatch(events []store.EventInsert, now time.Time) *eventBatch {
	b := &eventBatch{first: make([]int, len(events))}
	seen := make(map[store.EventKey]int, len(events))
	var (
		ids, types, keys, datas []string
		tenants                 []string
		versions                []*int64
		created                 []time.Time
		dIDs, dEvents, dSubs    []string
		dTenants                []string
		dNext                   []time.Time
		// Leased at insert (direct dispatch) when the owner is set.
		dOwners []*string
		dUntil  []*time.Time
	)
	for i, in := range events {
		ev := in.Event
		k := store.EventKeyOf(ev)
		if j, ok := seen[k]; ok {
			b.first[i] = j
			continue
		}
		seen[k] = i
		b.first[i] = i
		ids = append(ids, ev.ID)
		types = append(types, ev.Type)
		keys = append(keys, ev.Key)
		tenants = append(tenants, ev.Tenant)
		versions = append(versions, ev.Version)
		datas = append(datas, string(store.RawJSON(ev.Data)))
		created = append(created, ms(ev.CreatedAt))
		for _, d := range in.Deliveries {
			dIDs = append(dIDs, d.ID)
			dEvents = append(dEvents, ev.ID)
			dTenants = append(dTenants, ev.Tenant)
			dSubs = append(dSubs, d.SubscriptionID)
			dNext = append(dNext, ms(d.NextAttemptAt))
			if d.LeaseOwner != "" {
				owner, until := d.LeaseOwner, ms(d.LeaseUntil)
				dOwners, dUntil = append(dOwners, &owner), append(dUntil, &until)
			} else {
				dOwners, dUntil = append(dOwners, nil), append(dUntil, nil)
			}
		}
	}
	b.ids, b.tenants, b.subs = ids, tenants, dSubs
	b.deliveries = len(dIDs)
	b.args = []any{ids, types, keys, versions, datas, created, dIDs, dEvents, dSubs, ms(now), dNext,
		dOwners, dUntil, tenants, dTenants, nil, nil, nil, nil}
	if len(ids) == 1 {
		b.one = []any{ids[0], types[0], keys[0], versions[0], datas[0], created[0], tenants[0],
			dIDs, dSubs, dNext, dOwners, dUntil, ms(now), nil, nil, nil, nil}
		if len(dIDs) == 1 {
			b.oneDelivery = [5]any{dIDs[0], dSubs[0], dNext[0], dOwners[0], dUntil[0]}
		}
	}
	return b
}

// guard makes the insert check the fan-out cache's versions v and the
// publishing tokens (nil: none, the arguments newEventBatch left NULL).
func (b *eventBatch) guard(v *store.SubscriptionsVersions, tokens []store.TokenCheck) {
	if v != nil {
		b.args[15], b.args[16] = v.Subscriptions, v.Pauses
		if b.one != nil {
			b.one[13], b.one[14] = v.Subscriptions, v.Pauses
		}
	}
	if len(tokens) > 0 {
		hashes, ids := make([]string, len(tokens)), make([]string, len(tokens))
		for i, t := range tokens {
			hashes[i], ids[i] = t.Hash, t.ID
		}
		b.args[17], b.args[18] = hashes, ids
		if b.one != nil {
			b.one[15], b.one[16] = hashes, ids
		}
	}
	b.tokens = tokenGuardOf(len(tokens))
}

// manyStatement returns insertManySQL as b's guard spells it, with its
// arguments.
func (b *eventBatch) manyStatement() (string, []any) {
	return insertManySQLs[b.tokens], tokenArgs(b.tokens, b.args)
}

// oneStatement returns insertOneSQL as b's guard and delivery count spell
// it, with its arguments; b must store one event (b.one set).
func (b *eventBatch) oneStatement() (string, []any) {
	return b.oneStatementAs(b.tokens, b.deliveries <= 1)
}

// oneStatementAs returns insertOneSQL spelled with the token guard tokens
// and, when oneDelivery (b has at most one delivery), in its one-delivery
// form, with its arguments.
func (b *eventBatch) oneStatementAs(tokens tokenGuard, oneDelivery bool) (string, []any) {
	if oneDelivery {
		return insertOneSQLs[tokens][1], tokenArgs(tokens, slices.Concat(b.one[:7], b.oneDelivery[:], b.one[12:]))
	}
	return insertOneSQLs[tokens][0], tokenArgs(tokens, b.one)
}

// tokenArgs returns an insert's arguments for the token guard tokens: all
// of them, or without the last two (the token parameters) for
// tokensNone, whose statement takes none.
func tokenArgs(tokens tokenGuard, args []any) []any {
	if tokens == tokensNone {
		return args[:len(args)-2]
	}
	return args
}

// readbackSQL returns the delivery counts of the events the insert found
// already stored. It runs as the next statement of the same transaction:
// under READ COMMITTED it takes a fresh snapshot, so an original committed
// by a concurrent call while ON CONFLICT waited for it is visible. Rows this
// transaction inserted itself (xmin is our xid) are left out.
const readbackSQL = `SELECT id, tenant, delivery_count FROM events
	WHERE (id, tenant) IN (SELECT * FROM unnest($1::text[], $2::text[]))
	  AND xmin <> pg_current_xact_id()::xid`

// queue adds the insert and its duplicate read-back to batch.
func (b *eventBatch) queue(batch *pgx.Batch) {
	sql, args := b.manyStatement()
	batch.Queue(sql, args...)
	batch.Queue(readbackSQL, b.ids, b.tenants)
}

// read consumes the two results queue added and answers each input in order.
func (b *eventBatch) read(br pgx.BatchResults, events []store.EventInsert) ([]store.EventInsertResult, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	ins, err := readInserted(rows)
	if err != nil {
		return nil, err
	}
	rows, err = br.Query()
	if err != nil {
		return nil, err
	}
	original, err := readOriginals(rows)
	if err != nil {
		return nil, err
	}
	return b.answer(events, ins, original)
}

// inserted is what insertManySQL answered: the events it inserted and
// the named subscriptions that were gone.
type inserted struct {
	isNew map[store.EventKey]bool
	gone  map[string]bool
	// moved: a guard failed and nothing was inserted; tokensGone: the
	// tokens' (else the versions').
	moved      bool
	tokensGone bool
}

func readInserted(rows pgx.Rows) (*inserted, error) {
	ins := &inserted{isNew: map[store.EventKey]bool{}, gone: map[string]bool{}}
	var newID, newTenant, goneID *string
	var tok *bool
	if _, err := pgx.ForEachRow(rows, []any{&newID, &newTenant, &goneID, &tok}, func() error {
		switch {
		case newID != nil:
			ins.isNew[store.EventKey{ID: *newID, Tenant: *newTenant}] = true
		case goneID != nil:
			ins.gone[*goneID] = true
		default:
			ins.moved = true
			ins.tokensGone = tok != nil && !*tok
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return ins, nil
}

// readOriginals reads a read-back: the delivery counts of events already
// stored.
func readOriginals(rows pgx.Rows) (map[store.EventKey]int, error) {
	original := make(map[store.EventKey]int)
	var k store.EventKey
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&k.ID, &k.Tenant, &n}, func() error {
		original[k] = n
		return nil
	}); err != nil {
		return nil, err
	}
	return original, nil
}

// missing returns the keys of first occurrences the insert did not insert:
// duplicates of events already stored.
func (b *eventBatch) missing(ins *inserted) (ids, tenants []string) {
	for i, id := range b.ids {
		if !ins.isNew[store.EventKey{ID: id, Tenant: b.tenants[i]}] {
			ids, tenants = append(ids, id), append(tenants, b.tenants[i])
		}
	}
	return ids, tenants
}

// answer answers each input in order from what the insert and the
// read-back said.
func (b *eventBatch) answer(events []store.EventInsert, ins *inserted, original map[store.EventKey]int) ([]store.EventInsertResult, error) {
	// kept returns how many of ds were stored and the ids of the others.
	kept := func(ds []store.DeliveryInsert) (int, []string) {
		if len(ins.gone) == 0 {
			return len(ds), nil
		}
		live := make(map[string]bool, len(ds))
		for _, d := range ds {
			live[d.SubscriptionID] = !ins.gone[d.SubscriptionID]
		}
		dropped := store.DroppedDeliveries(ds, live)
		return len(ds) - len(dropped), dropped
	}
	out := make([]store.EventInsertResult, len(events))
	for i, in := range events {
		id, k := in.Event.ID, store.EventKeyOf(in.Event)
		f := b.first[i]
		switch {
		case ins.isNew[k] && f == i:
			n, dropped := kept(in.Deliveries)
			out[i] = store.EventInsertResult{ID: id, DeliveryCount: n, Dropped: dropped}
		case ins.isNew[k]:
			// Repeated inside this call: a duplicate of its first occurrence.
			n, _ := kept(events[f].Deliveries)
			out[i] = store.EventInsertResult{ID: id, Duplicate: true, DeliveryCount: n}
		default:
			n, ok := original[k]
			if !ok {
				// ON CONFLICT waits for a concurrent inserter, so an event
				// neither inserted nor found cannot happen; fail rather than
				// answer a duplicate that was never stored.
				return nil, errors.New("event " + id + " neither inserted nor found")
			}
			out[i] = store.EventInsertResult{ID: id, Duplicate: true, DeliveryCount: n}
		}
	}
	return out, nil
}

// duplicatesSQL reads the delivery counts of stored events, after the
// insert that found them committed: EventInsertMany's read-back, run only
// when the insert left some out.
const duplicatesSQL = `SELECT id, tenant, delivery_count FROM events
	WHERE (id, tenant) IN (SELECT * FROM unnest($1::text[], $2::text[]))`

// EventInsertMany stores events and their deliveries: the insert and the
// duplicate read-back go as one batch (one round trip), which PostgreSQL
// runs as one implicit transaction.
func (s *Store) EventInsertMany(ctx context.Context, params *store.EventInsertManyParams) ([]store.EventInsertResult, error) {
	const op = "error inserting events"
	if len(params.Events) == 0 {
		return []store.EventInsertResult{}, nil
	}
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	b := newEventBatch(params.Events, params.Now)
	b.guard(params.Versions, params.Tokens)
	// The insert alone (after genericPlansSQL for a small batch, in the
	// same round trip),
	// one implicit transaction; a deadlock or a serialization failure
	// (isRetryable) left nothing behind and it runs again, like the other
	// single-statement writes. The read-back of duplicates follows only
	// when there are any: a publish of new events (nearly all of them)
	// costs one statement, not two (issue 26: at steady rates most commits
	// hold one or two events). The originals it reads were committed
	// before the insert's ON CONFLICT let it finish, so a statement after
	// the commit sees them.
	var ins *inserted
	err = retryMoved(ctx, func() error {
		batch := &pgx.Batch{}
		db, generic := s.smallWrites(db, len(b.ids), b.deliveries) // claim.go
		if generic {
			batch.Queue(genericPlansSQL)
		}
		one := b.one != nil
		if one {
			sql, args := b.oneStatement()
			batch.Queue(sql, args...)
		} else {
			sql, args := b.manyStatement()
			batch.Queue(sql, args...)
		}
		br := db.SendBatch(ctx, batch)
		defer br.Close()
		if generic {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if one {
			ins, err = readInsertedOne(rows, b.subs)
		} else {
			ins, err = readInserted(rows)
		}
		if err != nil {
			return err
		}
		return br.Close()
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	if ins.tokensGone {
		return nil, store.ErrTokenGone
	}
	if ins.moved {
		return nil, store.ErrSubscriptionsMoved
	}
	var original map[store.EventKey]int
	if ids, tenants := b.missing(ins); len(ids) > 0 {
		rows, err := db.Query(ctx, duplicatesSQL, ids, tenants)
		if err == nil {
			original, err = readOriginals(rows)
		}
		if err != nil {
			return nil, mapErr(op, err)
		}
	}
	res, err := b.answer(params.Events, ins, original)
	if err != nil {
		return nil, mapErr(op, err)
	}
	s.notifyInserted(params.Events, res) // wake other nodes (notify.go)
	s.grew(b.deliveries)                 // planner statistics (analyze.go)
	return res, nil
}

const eventColumns = "id, type, key, version, data::text, created_at, tenant"

func scanEvent(row pgx.Row) (*herald.Event, error) {
	var ev herald.Event
	var data string
	if err := row.Scan(&ev.ID, &ev.Type, &ev.Key, &ev.Version, &data, &ev.CreatedAt, &ev.Tenant); err != nil {
		return nil, err
	}
	ev.Data = []byte(data)
	ev.CreatedAt = ev.CreatedAt.UTC()
	return &ev, nil
}

// EventGet returns an event with its deliveries.
func (s *Store) EventGet(ctx context.Context, params *store.EventGetParams) (*store.EventGetResult, error) {
	const op = "error reading event"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	// Both reads in one round trip; a batch outside a transaction runs as
	// one implicit transaction. With AnyTenant, the event is the only row
	// with the id (two rows: ambiguous) and its deliveries those of the
	// first row's tenant, used only when it is the only one.
	id := params.ID
	batch := &pgx.Batch{}
	if params.AnyTenant {
		batch.Queue("SELECT "+eventColumns+" FROM events WHERE id = $1 ORDER BY tenant", id)
		batch.Queue(`SELECT `+deliveryColumns+` FROM deliveries
			WHERE event_id = $1 AND event_tenant = (SELECT min(tenant) FROM events WHERE id = $1) ORDER BY id`, id)
	} else {
		batch.Queue("SELECT "+eventColumns+" FROM events WHERE id = $1 AND tenant = $2", id, params.Tenant)
		batch.Queue("SELECT "+deliveryColumns+" FROM deliveries WHERE event_id = $1 AND event_tenant = $2 ORDER BY id",
			id, params.Tenant)
	}
	br := db.SendBatch(ctx, batch)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, mapErr(op, err)
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*herald.Event, error) { return scanEvent(row) })
	if err != nil {
		return nil, mapErr(op, err)
	}
	ev, err := store.EventOne(id, found)
	if err != nil {
		return nil, err
	}
	rows, err = br.Query()
	if err != nil {
		return nil, mapErr(op, err)
	}
	dls, err := collectDeliveries(rows)
	if err != nil {
		return nil, mapErr(op, err)
	}
	if err := br.Close(); err != nil {
		return nil, mapErr(op, err)
	}
	return &store.EventGetResult{Event: ev, Deliveries: dls}, nil
}
