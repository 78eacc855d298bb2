-- Approvals (confirmation gates) outlive the daemon, as workspaces do: a
-- held operation can be decided, and the approved call made, across a
-- restart. `record` is the approval as the API shows it (JSON); the
-- screenshot of the screen when it was asked is kept beside it. Every step
-- is also an event in the audit log, which stays the lasting record; rows
-- of decided approvals are dropped an hour after the decision.
CREATE TABLE approvals (
    id         TEXT PRIMARY KEY NOT NULL,
    workspace  TEXT NOT NULL,
    state      TEXT NOT NULL,     -- pending, approved, denied, expired
    record     TEXT NOT NULL,     -- JSON
    screenshot BLOB,              -- PNG
    updated_at INTEGER NOT NULL   -- Unix milliseconds
);
