-- Threads and their messages (AG-UI messages, stored whole), run leases and run event logs.
CREATE TABLE IF NOT EXISTS messages (
    agent_id   TEXT    NOT NULL,
    thread_id  TEXT    NOT NULL,
    message_id TEXT    NOT NULL,
    position   INTEGER NOT NULL,
    role       TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (agent_id, thread_id, message_id)
);
CREATE INDEX IF NOT EXISTS messages_by_position ON messages (agent_id, thread_id, position);

CREATE TABLE IF NOT EXISTS thread_leases (
    agent_id   TEXT    NOT NULL,
    thread_id  TEXT    NOT NULL,
    run_id     TEXT    NOT NULL,
    holder     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (agent_id, thread_id)
);

CREATE TABLE IF NOT EXISTS runs (
    run_id      TEXT    NOT NULL PRIMARY KEY,
    agent_id    TEXT    NOT NULL,
    thread_id   TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    expires_at  INTEGER
);

CREATE TABLE IF NOT EXISTS run_events (
    run_id TEXT    NOT NULL,
    seq    INTEGER NOT NULL,
    frame  TEXT    NOT NULL,
    PRIMARY KEY (run_id, seq)
);
