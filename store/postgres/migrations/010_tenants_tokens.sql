-- 010: tenants and scoped API tokens (ADR 0013).
--
-- tenant is '' for untenanted rows, so equality filters need no NULL case.
-- A subscription's tenant and all_tenants are set at creation and never
-- change; an event's tenant is what fan-out matched it with. The tenant
-- indexes are partial, so untenanted traffic pays nothing for them; queries
-- filtering by tenant add "tenant <> ''" so the planner can use them. Adding a
-- column with a constant default rewrites no rows.
ALTER TABLE subscriptions ADD COLUMN tenant text NOT NULL DEFAULT '';
ALTER TABLE subscriptions ADD COLUMN all_tenants boolean NOT NULL DEFAULT false;
CREATE INDEX subscriptions_tenant ON subscriptions (tenant, id) WHERE tenant <> '';
ALTER TABLE events ADD COLUMN tenant text NOT NULL DEFAULT '';
CREATE INDEX events_tenant ON events (tenant, created_at) WHERE tenant <> '';

-- API tokens get an id (what lists show and revocation names), a name,
-- scopes, an optional tenant and expiry. Tokens stored before 010 are admin
-- tokens (the generated one) and get an id derived from their hash.
-- Revoking deletes the row.
ALTER TABLE api_tokens ADD COLUMN id text;
ALTER TABLE api_tokens ADD COLUMN name text NOT NULL DEFAULT '';
ALTER TABLE api_tokens ADD COLUMN scopes text[] NOT NULL DEFAULT '{admin}';
ALTER TABLE api_tokens ADD COLUMN tenant text NOT NULL DEFAULT '';
ALTER TABLE api_tokens ADD COLUMN expires_at timestamptz;
UPDATE api_tokens SET id = 'tok_' || substr(hash, 1, 26), name = 'admin' WHERE id IS NULL;
ALTER TABLE api_tokens ALTER COLUMN id SET NOT NULL;
CREATE UNIQUE INDEX api_tokens_id ON api_tokens (id);
