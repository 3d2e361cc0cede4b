-- Run by the downstream MariaDB image at its first start, after it created MARIADB_USER
-- (shardmerge): the JDBC sink creates each target's database and table, changes them as
-- the shards' DDL decides, and writes rows; its own tables (write slots, history,
-- staging) live in the database `shardmerge` (sink.meta). Grant these on the databases
-- your targets use (here `shop`, the example's) and on the sink's own.
GRANT CREATE, ALTER, DROP, INDEX, SELECT, INSERT, UPDATE, DELETE ON `shop`.* TO 'shardmerge'@'%';
GRANT CREATE, ALTER, DROP, INDEX, SELECT, INSERT, UPDATE, DELETE ON `shardmerge`.* TO 'shardmerge'@'%';
