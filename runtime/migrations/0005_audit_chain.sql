-- The sealed audit log. Every event is a record in the hash chain of its
-- workspace (events about no workspace: the chain 'host'): its seq in that
-- chain, its canonical bytes as sealed, and SHA-256(previous hash ‖ bytes).
-- Rows from before this migration have no chain and are not sealed.
ALTER TABLE events ADD COLUMN chain TEXT;
ALTER TABLE events ADD COLUMN seq INTEGER;
ALTER TABLE events ADD COLUMN hash TEXT;    -- hex
ALTER TABLE events ADD COLUMN sealed TEXT;  -- the canonical bytes the hash covers
-- Two appends can never fork a chain: the second would repeat a seq.
CREATE UNIQUE INDEX events_chain_seq ON events (chain, seq);

-- The head of each chain (its last record), and the last seq a checkpoint
-- signed and when.
CREATE TABLE chain_heads (
    chain          TEXT PRIMARY KEY,
    seq            INTEGER NOT NULL,
    hash           TEXT NOT NULL,
    at             INTEGER NOT NULL,            -- Unix ms of the last record
    checkpoint_seq INTEGER NOT NULL DEFAULT 0,
    checkpoint_at  INTEGER NOT NULL DEFAULT 0   -- Unix ms of that checkpoint
);

-- Signed checkpoints: Ed25519 over (chain, seq, hash, at).
CREATE TABLE checkpoints (
    chain      TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    hash       TEXT NOT NULL,
    at         INTEGER NOT NULL,
    public_key TEXT NOT NULL,
    signature  TEXT NOT NULL,
    PRIMARY KEY (chain, seq)
);
