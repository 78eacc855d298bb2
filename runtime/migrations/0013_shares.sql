-- Share links: a token of role `viewer` (watch) or `guest` (watch, and
-- take control) reaching one workspace, made for a person without a token
-- of their own. `share_of` is that workspace; `expires_at` (Unix
-- milliseconds) ends it by itself, as revoking does.
ALTER TABLE tokens ADD COLUMN expires_at INTEGER;
ALTER TABLE tokens ADD COLUMN share_of TEXT;
