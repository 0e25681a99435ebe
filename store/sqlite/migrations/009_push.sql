-- 009: the Web Push service (package push). One row per user agent (the
-- router record), per registered channel, per stored message, per
-- broadcast. Messages expire by expires_at and are deleted on ack; a
-- bounded sweep removes expired messages and idle user agents (ADR 0009).
CREATE TABLE push_users (
    uaid         TEXT    PRIMARY KEY,
    node_id      TEXT    NOT NULL DEFAULT '',
    connected_at INTEGER NOT NULL,
    last_connect INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX push_users_last_connect ON push_users (last_connect);

CREATE TABLE push_channels (
    uaid       TEXT    NOT NULL,
    channel_id TEXT    NOT NULL,
    key_hash   BLOB,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (uaid, channel_id)
) WITHOUT ROWID;

CREATE TABLE push_messages (
    uaid       TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    channel_id TEXT    NOT NULL,
    topic      TEXT,
    data       BLOB,
    headers    TEXT,
    ttl        INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (uaid, id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX push_messages_topic ON push_messages (uaid, channel_id, topic) WHERE topic IS NOT NULL;
CREATE INDEX push_messages_expires ON push_messages (expires_at);

CREATE TABLE push_broadcasts (
    id         TEXT    PRIMARY KEY,
    version    TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
