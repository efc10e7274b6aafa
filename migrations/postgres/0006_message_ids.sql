-- The conversation-memory API finds a message (an interaction) by its id alone.
CREATE INDEX IF NOT EXISTS messages_by_id ON messages (message_id);
CREATE INDEX IF NOT EXISTS threads_by_id ON threads (thread_id);
