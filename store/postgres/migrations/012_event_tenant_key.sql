-- 012: an event id is unique within its tenant, not across tenants (issue
-- 20): the idempotency key is (id, tenant), the untenanted space being
-- tenant '' (NOT NULL since 010, so the key needs no NULL case).
-- Deliveries name their event by both: event_tenant is the event's tenant,
-- which an all-tenants subscription's deliveries need (their
-- subscription's tenant does not say it).
--
-- events is not partitioned (only deliveries is, by state: 005), so its
-- primary key needs no partition column. Id first: EventGet of an id in
-- any tenant and the delivery-to-event probes search by id.
ALTER TABLE deliveries ADD COLUMN event_tenant text NOT NULL DEFAULT '';
-- Event ids were unique until now, so each delivery's event is the one row
-- with its id; only tenanted events' deliveries change.
UPDATE deliveries d SET event_tenant = e.tenant
    FROM events e WHERE e.id = d.event_id AND e.tenant <> '';
ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (id, tenant);
-- deliveries_event_idx (event_id) serves the lookups by (event_id,
-- event_tenant) as it is: an id held by two tenants is rare, and rebuilding
-- an index of the hot table is not worth that.
