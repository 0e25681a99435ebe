-- 016: herald's VAPID key pair, the application server key of Web Push
-- destinations (store/vapid.go): one row, shared by every node. The
-- private key is sealed with --encryption-key like subscription secrets.
CREATE TABLE webpush_vapid (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    private_key TEXT NOT NULL,
    public_key  TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
