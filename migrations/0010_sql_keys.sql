-- What a data node checks an SQL client's (MySQL protocol) password by:
-- SHA-1 of the SHA-1 of the key's secret, hex. NULL for keys made before
-- SQL access, which cannot be used over SQL.

ALTER TABLE api_keys ADD COLUMN sql_hash TEXT;
