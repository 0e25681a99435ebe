-- 015: destinations (issue 22). A subscription delivers to a webhook (url
-- and method stay the truth for those: destination is NULL) or to another
-- destination type, held as JSON herald.Destination in destination. A
-- broker destination names an operator-owned connection; connection copies
-- that name so "is this connection in use?" is one indexed read inside the
-- connection delete's transaction.
ALTER TABLE subscriptions ADD COLUMN destination TEXT;
ALTER TABLE subscriptions ADD COLUMN connection TEXT;
CREATE INDEX subscriptions_connection ON subscriptions (connection) WHERE connection IS NOT NULL;

-- Operator-owned broker connections. url is sealed at rest like
-- subscription secrets (it carries the broker password); tls and tenants
-- are JSON (a herald.ConnectionTLS or NULL, an array of tenant ids).
CREATE TABLE connections (
    name        TEXT PRIMARY KEY,
    type        TEXT NOT NULL,
    url         TEXT NOT NULL,
    tls         TEXT,
    tenants     TEXT NOT NULL DEFAULT '[]',
    all_tenants INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
