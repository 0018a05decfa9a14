-- When a sandbox's checkpoints are taken: '' on request only,
-- 'per_tool_call' before each tool call that changes something too.
ALTER TABLE sandboxes ADD COLUMN checkpoints TEXT NOT NULL DEFAULT '';
