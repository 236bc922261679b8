-- Where each data node serves SQL over the MySQL protocol, as its
-- heartbeat reports it ('' from a node that does not report it).

ALTER TABLE datanodes ADD COLUMN mysql_addr TEXT NOT NULL DEFAULT '';
