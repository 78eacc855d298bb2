-- Whether a secret's value may also go into request bodies: the proxy then
-- reads the body of a request to one of its hosts (up to a cap) and puts
-- the value in place of the placeholder there too. 0: headers only.
ALTER TABLE secrets ADD COLUMN body INTEGER NOT NULL DEFAULT 0;
