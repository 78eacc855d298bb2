-- Workspace snapshots of the `disk` kind: a running workspace's user files
-- (/home/user and /tmp) and browser profile, two archives under the state
-- directory named by the id, each with its size and SHA-256 as taken.
-- `sha256` is the digest over both, written into every fork's audit chain.
CREATE TABLE snapshots (
    id             TEXT PRIMARY KEY NOT NULL,
    owner_token    TEXT NOT NULL,
    name           TEXT NOT NULL,
    workspace_id   TEXT NOT NULL,   -- the workspace it was taken of
    backend        TEXT NOT NULL,
    kind           TEXT NOT NULL,   -- 'disk'
    home_size      INTEGER NOT NULL,
    home_sha256    TEXT NOT NULL,
    profile_size   INTEGER NOT NULL,
    profile_sha256 TEXT NOT NULL,
    sha256         TEXT NOT NULL,
    created_at     INTEGER NOT NULL, -- Unix milliseconds
    UNIQUE (owner_token, name)
);
