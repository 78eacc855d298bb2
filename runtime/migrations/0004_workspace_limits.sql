-- Resource limits of each workspace (memory, CPU, tasks, disk), as the JSON
-- of `cubicle_runtime::limits::Limits`. NULL: made before limits existed; it
-- gets the defaults when it next starts.
ALTER TABLE workspaces ADD COLUMN limits TEXT;
