-- Named browser profiles: Chromium's user data directory (caches left out)
-- kept between workspaces as one archive, a file under the state
-- directory named by the id. `owner_token` made it; `running_in` is the
-- running workspace using it (at most one), NULL when none does.
CREATE TABLE profiles (
    id          TEXT PRIMARY KEY NOT NULL,
    owner_token TEXT NOT NULL,
    name        TEXT NOT NULL,
    size        INTEGER NOT NULL DEFAULT 0,  -- the archive's bytes, 0 until saved
    sha256      TEXT,                        -- the archive's, NULL until saved
    running_in  TEXT,
    created_at  INTEGER NOT NULL,            -- Unix milliseconds
    saved_at    INTEGER,
    UNIQUE (owner_token, name)
);

-- The profile a workspace runs with, from its create: loaded at every
-- start, saved at every stop.
ALTER TABLE workspaces ADD COLUMN profile TEXT;
