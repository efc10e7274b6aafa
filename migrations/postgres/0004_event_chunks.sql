-- A run's event log in chunks: one row per batch the writer flushes (the frames of
-- `first_seq..=last_seq`, one JSON frame per line), instead of one row per frame. Streaming a
-- reply at full speed wrote tens of thousands of rows a second; a chunk costs one row.
CREATE TABLE IF NOT EXISTS run_event_chunks (
    run_id    TEXT    NOT NULL,
    first_seq BIGINT  NOT NULL,
    last_seq  BIGINT  NOT NULL,
    frames    TEXT    NOT NULL,
    PRIMARY KEY (run_id, first_seq)
);
CREATE INDEX IF NOT EXISTS run_event_chunks_last ON run_event_chunks (run_id, last_seq);
DROP TABLE IF EXISTS run_events;
