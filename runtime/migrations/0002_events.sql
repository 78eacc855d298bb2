-- Events: one row per thing that happened that a reviewer must be able to
-- see later (control taken and handed back, tokens made and revoked). The
-- audit log chains these rows; rows are only ever appended.
CREATE TABLE events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    at           INTEGER NOT NULL,  -- Unix milliseconds
    kind         TEXT NOT NULL,     -- e.g. control.take, control.release, token.revoke
    workspace_id TEXT,              -- NULL for events not about one workspace
    actor_id     TEXT,              -- the token that did it (NULL: the daemon itself)
    actor_name   TEXT,
    actor_role   TEXT,
    detail       TEXT NOT NULL DEFAULT '{}'  -- JSON
);
CREATE INDEX events_workspace ON events (workspace_id, id);
