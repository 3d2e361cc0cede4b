"""Development tooling for shardmerge: not part of the job.

A local Kafka broker (``kafka_local``) and a local MariaDB + Debezium upstream
(``upstream_local``), both supervised by ``procs``; the Debezium producer and workload
generator; the demo; the kill harness; the spark and mariadb scenario engines. Needs the
``dev`` extra (confluent-kafka, pymysql).
"""
