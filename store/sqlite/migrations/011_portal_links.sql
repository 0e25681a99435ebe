-- 011: consumer-portal links (ADR 0015). A link is exchanged once for a
-- tenant-confined session token; only the hash of its token is stored.
-- theme is the portal's theme as JSON text (NULL: none).
CREATE TABLE portal_links (
    hash       TEXT PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    tenant     TEXT NOT NULL,
    theme      TEXT,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER
);
-- PortalLinkCreate deletes long-expired links by expiry.
CREATE INDEX portal_links_expires ON portal_links (expires_at);
