-- Ownership and scope: a workspace remembers the token that created it; a
-- token may be limited to (or widened to) a set of workspaces.
ALTER TABLE workspaces ADD COLUMN owner_token TEXT;  -- NULL: made before owners existed, or by the daemon
-- NULL: the role's default scope (agents: their own workspaces; others: all).
-- '*': every workspace. Otherwise a JSON array of workspace ids.
ALTER TABLE tokens ADD COLUMN scope TEXT;

-- Every operation through the gateway's core is an event: these say which
-- request it was, from where, and how it ended.
ALTER TABLE events ADD COLUMN request_id TEXT;
ALTER TABLE events ADD COLUMN client TEXT;
ALTER TABLE events ADD COLUMN outcome TEXT;  -- ok | error:<code> | denied
