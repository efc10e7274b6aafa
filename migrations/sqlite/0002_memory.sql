-- Agentic memory (ml-commons-shaped): memory containers, their sessions and working memory.
-- JSON documents are TEXT. Namespaces are kept whole as JSON and also one row per key in
-- memory_namespaces, which the namespace filters of the search API join against.
-- `seq` is a per-container counter (memory_containers.next_seq) that gives sessions and
-- working memories a total insertion order for stable paging.
CREATE TABLE IF NOT EXISTS memory_containers (
    container_id      TEXT    NOT NULL PRIMARY KEY,
    name              TEXT    NOT NULL,
    description       TEXT,
    configuration     TEXT    NOT NULL,
    next_seq          INTEGER NOT NULL,
    created_time      INTEGER NOT NULL,
    last_updated_time INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_containers_by_time ON memory_containers (created_time);

CREATE TABLE IF NOT EXISTS memory_sessions (
    container_id      TEXT    NOT NULL,
    session_id        TEXT    NOT NULL,
    seq               INTEGER NOT NULL,
    summary           TEXT,
    metadata          TEXT    NOT NULL,
    namespace         TEXT    NOT NULL,
    namespace_size    INTEGER NOT NULL,
    next_message_id   INTEGER NOT NULL,
    created_time      INTEGER NOT NULL,
    last_updated_time INTEGER NOT NULL,
    PRIMARY KEY (container_id, session_id)
);
CREATE INDEX IF NOT EXISTS memory_sessions_by_seq ON memory_sessions (container_id, seq);

CREATE TABLE IF NOT EXISTS memory_working (
    container_id      TEXT    NOT NULL,
    memory_id         TEXT    NOT NULL,
    seq               INTEGER NOT NULL,
    session_id        TEXT,
    message_id        INTEGER,
    payload_type      TEXT    NOT NULL,
    namespace         TEXT    NOT NULL,
    namespace_size    INTEGER NOT NULL,
    body              TEXT    NOT NULL,
    created_time      INTEGER NOT NULL,
    last_updated_time INTEGER NOT NULL,
    PRIMARY KEY (container_id, memory_id)
);
CREATE INDEX IF NOT EXISTS memory_working_by_seq ON memory_working (container_id, seq);
CREATE INDEX IF NOT EXISTS memory_working_by_session ON memory_working (container_id, session_id, seq);

CREATE TABLE IF NOT EXISTS memory_namespaces (
    container_id TEXT NOT NULL,
    owner_kind   TEXT NOT NULL,
    owner_id     TEXT NOT NULL,
    ns_key       TEXT NOT NULL,
    ns_value     TEXT NOT NULL,
    PRIMARY KEY (container_id, owner_kind, owner_id, ns_key)
);
CREATE INDEX IF NOT EXISTS memory_namespaces_by_value ON memory_namespaces (container_id, owner_kind, ns_key, ns_value, owner_id);
