-- Scale-out (issue 23): the image of a suspended sandbox its node
-- uploaded to the shared image store ('' none), which lets it resume on
-- another node.
ALTER TABLE sandboxes ADD COLUMN image TEXT NOT NULL DEFAULT '';
