-- The agent API's documents (ml-commons-shaped): connectors, models, agents and tasks.
-- `body` is the JSON document without secrets; `sealed` holds the credential, encrypted with
-- AES-256-GCM under the gateway's master key (base64 of nonce || ciphertext), never plaintext.
CREATE TABLE IF NOT EXISTS ml_docs (
    kind         TEXT   NOT NULL,
    id           TEXT   NOT NULL,
    name         TEXT   NOT NULL,
    body         TEXT   NOT NULL,
    sealed       TEXT,
    created_ms   BIGINT NOT NULL,
    updated_ms   BIGINT NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX IF NOT EXISTS ml_docs_by_time ON ml_docs (kind, created_ms);
