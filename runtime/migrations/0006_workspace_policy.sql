-- The policy each workspace runs under (a policy name from the gateway's
-- policy directory). No row: the server's default policy. Switching it is
-- an event (policy.switch) in the audit log; this row is only the current one.
CREATE TABLE workspace_policies (
    workspace_id TEXT PRIMARY KEY NOT NULL,
    policy       TEXT NOT NULL,
    set_at       INTEGER NOT NULL,  -- Unix milliseconds
    set_by       TEXT               -- the token that set it (NULL: the daemon)
);
