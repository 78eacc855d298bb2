-- Workspaces: one row per workspace ever created. Rows are never deleted, so
-- the audit log can always name them; `state` says where each one is.
CREATE TABLE workspaces (
    id          TEXT PRIMARY KEY NOT NULL,
    name        TEXT NOT NULL,
    backend     TEXT NOT NULL,
    state       TEXT NOT NULL,
    width       INTEGER NOT NULL,
    height      INTEGER NOT NULL,
    host_uid    INTEGER NOT NULL,
    pid         INTEGER,
    error       TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX workspaces_state ON workspaces (state);

-- API tokens, stored only as SHA-256 hashes of the secret.
CREATE TABLE tokens (
    id          TEXT PRIMARY KEY NOT NULL,
    name        TEXT NOT NULL,
    role        TEXT NOT NULL,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
