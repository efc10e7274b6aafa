-- A run's chunks are read by run id (the primary key's prefix) and filtered by `last_seq`
-- there: the second index only doubled the index pages every flush touched.
DROP INDEX IF EXISTS run_event_chunks_last;
