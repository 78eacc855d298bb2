-- Webhook subscriptions: the gateway POSTs each new event of the kinds a
-- subscription names, signed with its secret, to its URL, in the order of
-- the event log. `cursor` is the id of the last event it has dealt with
-- (delivered, or given up on after its retries), so deliveries resume
-- after a restart where they stopped. `owner_token` is the token that made
-- it: a subscription sees only the events that token may see, and stops
-- when the token is revoked. The secret signs deliveries, so it is kept.
CREATE TABLE webhooks (
    id          TEXT PRIMARY KEY NOT NULL,
    owner_token TEXT NOT NULL,
    url         TEXT NOT NULL,
    kinds       TEXT NOT NULL,     -- JSON list
    workspace   TEXT,              -- only this workspace's events
    secret      TEXT NOT NULL,     -- whsec_<base64>
    cursor      INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,  -- Unix milliseconds
    last        TEXT               -- JSON: the last delivery's outcome
);
