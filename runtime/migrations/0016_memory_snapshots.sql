-- Snapshots of the `memory` kind (a microVM's whole machine): four files
-- under the state directory named by the id — the VMM's state file, guest
-- memory, the root disk's overlay and the host disk — each named by its
-- SHA-256, and the desktop image the overlay was made over. `disk` kind
-- rows leave them empty; `memory` rows leave the archive columns empty.
ALTER TABLE snapshots ADD COLUMN state_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE snapshots ADD COLUMN memory_size INTEGER NOT NULL DEFAULT 0;  -- guest RAM, bytes
ALTER TABLE snapshots ADD COLUMN memory_bytes INTEGER NOT NULL DEFAULT 0; -- of it written
ALTER TABLE snapshots ADD COLUMN memory_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE snapshots ADD COLUMN disk_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE snapshots ADD COLUMN disk_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE snapshots ADD COLUMN host_disk_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE snapshots ADD COLUMN base_image TEXT NOT NULL DEFAULT '';
