-- Host-bound secrets: a value the egress proxy puts in place of a
-- placeholder in requests to the named hosts only. The value is kept here
-- (the state directory is root's alone) and never shown by the API.
-- `owner_token` made it: it and admins may give it to a workspace or
-- remove it.
CREATE TABLE secrets (
    id          TEXT PRIMARY KEY NOT NULL,
    owner_token TEXT NOT NULL,
    name        TEXT NOT NULL,
    value       TEXT NOT NULL,
    hosts       TEXT NOT NULL,     -- JSON list of lowercase host names
    created_at  INTEGER NOT NULL   -- Unix milliseconds
);

-- A secret given to a workspace: the placeholder it holds instead, and
-- where it was put (an environment variable of its commands, a file).
CREATE TABLE secret_bindings (
    workspace   TEXT NOT NULL,
    secret      TEXT NOT NULL REFERENCES secrets (id) ON DELETE CASCADE,
    placeholder TEXT NOT NULL UNIQUE,
    env         TEXT,
    path        TEXT,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (workspace, secret)
);
