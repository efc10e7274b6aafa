-- Who made what: the principal (the API key's name; '' for the one anonymous principal of a
-- gateway without keys) that created a thread, a run, an agent-API document (tasks) or a
-- memory object. Another principal is refused (404) unless its key is an admin.
CREATE TABLE IF NOT EXISTS threads (
    agent_id   TEXT    NOT NULL,
    thread_id  TEXT    NOT NULL,
    owner      TEXT    NOT NULL,
    created_at BIGINT  NOT NULL,
    PRIMARY KEY (agent_id, thread_id)
);
-- Threads stored before owners were recorded belong to the anonymous principal: with keys
-- configured only an admin reaches them, instead of whoever names them first.
INSERT INTO threads (agent_id, thread_id, owner, created_at)
    SELECT agent_id, thread_id, '', MIN(created_at) FROM messages GROUP BY agent_id, thread_id;
ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE ml_docs ADD COLUMN owner TEXT;
ALTER TABLE memory_containers ADD COLUMN owner TEXT;
ALTER TABLE memory_sessions ADD COLUMN owner TEXT;
ALTER TABLE memory_working ADD COLUMN owner TEXT;
