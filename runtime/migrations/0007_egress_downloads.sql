-- Each workspace's egress policy (the JSON of
-- `cubicle_runtime::egress::EgressPolicyDoc`). A workspace without a row
-- runs under the server's default (`--egress-default`).
CREATE TABLE egress_policies (
    workspace_id TEXT PRIMARY KEY,
    policy TEXT NOT NULL,
    set_at INTEGER NOT NULL,
    set_by TEXT
);

-- Downloads held in quarantine: the file is `quarantine/<sha256>` under the
-- data directory; `state` is held, released or rejected.
CREATE TABLE downloads (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    url TEXT NOT NULL,
    name TEXT NOT NULL,
    offered_name TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    sniffed_type TEXT,
    claimed_type TEXT,
    hits TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT,
    created_at INTEGER NOT NULL,
    decided_at INTEGER,
    decided_by TEXT,
    released_path TEXT
);
CREATE INDEX downloads_by_workspace ON downloads (workspace_id, created_at);
CREATE INDEX downloads_by_state ON downloads (state, created_at);
