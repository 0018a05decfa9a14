-- When a sandbox's checkpoints are taken: '' on request only,
-- 'per_tool_call' before each tool call that changes something too.
ALTER TABLE sandboxes ADD COLUMN checkpoints TEXT NOT NULL DEFAULT '';
-- Commands run in a sandbox before it is suspended or stopped, and once
-- it runs again: '' for none.
ALTER TABLE sandboxes ADD COLUMN on_suspend TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN on_resume TEXT NOT NULL DEFAULT '';
