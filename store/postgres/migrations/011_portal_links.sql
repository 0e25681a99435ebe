-- 011: consumer-portal links (ADR 0015). A link is exchanged once for a
-- tenant-confined session token; only the hash of its token is stored.
-- theme is the portal's theme (NULL: none).
CREATE TABLE portal_links (
    hash       text PRIMARY KEY,
    id         text NOT NULL UNIQUE,
    tenant     text NOT NULL,
    theme      jsonb,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);
-- PortalLinkCreate deletes long-expired links by expiry.
CREATE INDEX portal_links_expires ON portal_links (expires_at);
