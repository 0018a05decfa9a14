-- Services: a background process with a port is a service, public or not,
-- in a slot or not.
ALTER TABLE processes ADD COLUMN public BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE processes ADD COLUMN slot TEXT NOT NULL DEFAULT '';
