-- 009: the Web Push service (package push). One row per user agent (the
-- router record), per registered channel, per stored message, per
-- broadcast. Messages expire by expires_at and are deleted on ack; a
-- bounded sweep removes expired messages and idle user agents (ADR 0009).
CREATE TABLE push_users (
    uaid         text   PRIMARY KEY,
    node_id      text   NOT NULL DEFAULT '',
    connected_at bigint NOT NULL,
    last_connect timestamptz NOT NULL
);
CREATE INDEX push_users_last_connect ON push_users (last_connect);

CREATE TABLE push_channels (
    uaid       text   NOT NULL REFERENCES push_users (uaid) ON DELETE CASCADE,
    channel_id text   NOT NULL,
    key_hash   bytea,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (uaid, channel_id)
);

CREATE TABLE push_messages (
    uaid       text   NOT NULL,
    id         text   NOT NULL,
    channel_id text   NOT NULL,
    topic      text,
    data       bytea,
    headers    jsonb,
    ttl        integer NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (uaid, id),
    FOREIGN KEY (uaid, channel_id) REFERENCES push_channels (uaid, channel_id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX push_messages_topic ON push_messages (uaid, channel_id, topic) WHERE topic IS NOT NULL;
CREATE INDEX push_messages_expires ON push_messages (expires_at);

CREATE TABLE push_broadcasts (
    id         text PRIMARY KEY,
    version    text NOT NULL,
    updated_at timestamptz NOT NULL
);
