-- 015: destinations (issue 22). A subscription delivers to a webhook (url
-- and method stay the truth for those: destination is NULL) or to another
-- destination type, held as JSON herald.Destination in destination. A
-- broker destination names an operator-owned connection; connection copies
-- that name so "is this connection in use?" is one indexed read inside the
-- connection delete's transaction. Nullable columns without a default
-- rewrite no rows.
ALTER TABLE subscriptions ADD COLUMN destination jsonb;
ALTER TABLE subscriptions ADD COLUMN connection text;
CREATE INDEX subscriptions_connection ON subscriptions (connection) WHERE connection IS NOT NULL;

-- Operator-owned broker connections. url is sealed at rest like
-- subscription secrets (it carries the broker password); tls is a
-- herald.ConnectionTLS as JSON (NULL when none).
CREATE TABLE connections (
    name        text COLLATE "C" PRIMARY KEY, -- byte order, as names are paged
    type        text NOT NULL,
    url         text NOT NULL,
    tls         jsonb,
    tenants     text[] NOT NULL DEFAULT '{}',
    all_tenants boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
