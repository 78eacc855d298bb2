-- Each workspace's own time limits, as set at create. A NULL field (or no
-- row) takes the server's default (`--ttl-seconds`, `--idle-timeout-seconds`,
-- `--on-expiry`); 0 means no limit. Expiry itself is an event
-- (workspace.expire) in the audit log.
CREATE TABLE workspace_time_limits (
    workspace_id TEXT PRIMARY KEY NOT NULL,
    ttl_ms       INTEGER,          -- longest run after each start
    idle_ms      INTEGER,          -- longest time without any activity
    on_expiry    TEXT,             -- 'stop' (home kept) or 'delete'
    set_at       INTEGER NOT NULL  -- Unix milliseconds
);
