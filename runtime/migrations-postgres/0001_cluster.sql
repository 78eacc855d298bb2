-- The state several Cubicle hosts share, in PostgreSQL: the same contract
-- as the SQLite store (`cluster::ClusterStore`), its own schema. Times are
-- Unix milliseconds, as in SQLite.

CREATE TABLE nodes (
    name         TEXT PRIMARY KEY,
    address      TEXT NOT NULL,
    backends     TEXT NOT NULL,
    capacity     BIGINT NOT NULL,
    free         BIGINT NOT NULL,
    epoch        BIGINT NOT NULL,
    status       TEXT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    down_reason  TEXT
);

CREATE TABLE placements (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    backend     TEXT NOT NULL,
    state       TEXT NOT NULL,
    owner_token TEXT,
    node        TEXT NOT NULL REFERENCES nodes (name),
    node_epoch  BIGINT NOT NULL,
    desired     TEXT NOT NULL,
    lost_reason TEXT,
    error       TEXT,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE INDEX placements_node ON placements (node);

CREATE TABLE tokens (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    role        TEXT NOT NULL,
    secret_hash TEXT NOT NULL UNIQUE,
    scope       TEXT,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT,
    revoked_at  BIGINT
);

CREATE TABLE control (
    workspace TEXT PRIMARY KEY,
    holder    TEXT NOT NULL,
    since     BIGINT NOT NULL
);

CREATE TABLE approvals (
    id         TEXT PRIMARY KEY,
    workspace  TEXT NOT NULL,
    state      TEXT NOT NULL,
    record     TEXT NOT NULL,
    digest     TEXT,
    decided_by TEXT,
    ran_at     BIGINT,
    updated_at BIGINT NOT NULL
);

-- The sealed audit log: each chain's records, and each chain's head row,
-- which an append locks (`SELECT … FOR UPDATE`) to take the next seq: one
-- writer per chain at a time, whichever node or edge it runs on.
CREATE TABLE events (
    id           BIGSERIAL PRIMARY KEY,
    at           BIGINT NOT NULL,
    kind         TEXT NOT NULL,
    workspace_id TEXT,
    actor_id     TEXT,
    actor_name   TEXT,
    actor_role   TEXT,
    detail       TEXT NOT NULL,
    request_id   TEXT,
    client       TEXT,
    outcome      TEXT,
    chain        TEXT NOT NULL,
    seq          BIGINT NOT NULL,
    hash         TEXT NOT NULL,
    sealed       TEXT NOT NULL,
    UNIQUE (chain, seq)
);

CREATE TABLE chain_heads (
    chain TEXT PRIMARY KEY,
    seq   BIGINT NOT NULL,
    hash  TEXT NOT NULL,
    at    BIGINT NOT NULL
);

CREATE TABLE artifacts (
    kind      TEXT NOT NULL,
    id        TEXT NOT NULL,
    workspace TEXT NOT NULL,
    node      TEXT NOT NULL,
    bytes     BIGINT NOT NULL,
    sha256    TEXT NOT NULL,
    at        BIGINT NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX artifacts_workspace ON artifacts (workspace, kind);
