-- Past one host (`cubicle node` / `cubicle edge`): the state the hosts
-- share, kept behind `cluster::ClusterStore`. Single-host `cubicle serve`
-- leaves these empty (its workspaces have no node).

-- Each host's daemon. `epoch` is new at every start of it: a write carries
-- the epoch it was made under and is refused when the node has a newer one
-- or is down (fencing).
CREATE TABLE nodes (
    name         TEXT PRIMARY KEY NOT NULL,
    address      TEXT NOT NULL,
    backends     TEXT NOT NULL,        -- comma-separated: microvm, jail
    capacity     INTEGER NOT NULL,     -- workspaces it may hold
    free         INTEGER NOT NULL,     -- as of its last heartbeat
    epoch        INTEGER NOT NULL,
    status       TEXT NOT NULL,        -- up, down
    heartbeat_at INTEGER NOT NULL,     -- Unix ms
    down_reason  TEXT
);

-- Which node holds each workspace, under which of its epochs; what its
-- owner asked for (`desired`: running, stopped, deleted), where it is
-- (`state`), why it is lost. A node's own facts of a workspace (its host
-- uid, pids, disk) stay in that node's `workspaces` table.
CREATE TABLE placements (
    id          TEXT PRIMARY KEY NOT NULL,
    name        TEXT NOT NULL,
    backend     TEXT NOT NULL,
    state       TEXT NOT NULL,
    owner_token TEXT,
    node        TEXT NOT NULL REFERENCES nodes (name),
    node_epoch  INTEGER NOT NULL,
    desired     TEXT NOT NULL,
    lost_reason TEXT,
    error       TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX placements_node ON placements (node);

-- Who holds a workspace's input (the operator's take-over), whichever edge
-- they came through.
CREATE TABLE control (
    workspace TEXT PRIMARY KEY NOT NULL,
    holder    TEXT NOT NULL,
    since     INTEGER NOT NULL
);

-- An approval is bound to what it approves (`digest`) and runs once.
ALTER TABLE approvals ADD COLUMN digest TEXT;
ALTER TABLE approvals ADD COLUMN decided_by TEXT;
ALTER TABLE approvals ADD COLUMN ran_at INTEGER;

-- Where a workspace's files are, by node: memory checkpoints, recordings,
-- quarantined downloads.
CREATE TABLE artifacts (
    kind      TEXT NOT NULL,           -- checkpoint, recording, quarantine
    id        TEXT NOT NULL,
    workspace TEXT NOT NULL,
    node      TEXT NOT NULL,
    bytes     INTEGER NOT NULL,
    sha256    TEXT NOT NULL,
    at        INTEGER NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX artifacts_workspace ON artifacts (workspace, kind);
