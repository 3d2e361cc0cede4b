-- Run by the MariaDB image at its first start, after it created MARIADB_USER (debezium).
-- What Debezium's MariaDB connector needs and no more: read the binlog (REPLICATION SLAVE,
-- REPLICATION CLIENT), and for the snapshot read the tables (SELECT), list the databases
-- (SHOW DATABASES) and take the global read lock (RELOAD). The same grants as the tests'
-- upstream (devkit/upstream_local.py DEBEZIUM_GRANTS), where Debezium runs with them.
GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'debezium'@'%';
