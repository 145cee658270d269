# Sourced by .ci/run: start and stop the servers the store tests use.
# (filled in by the stores work: redis-server from Debian, PostgreSQL 15 via initdb/pg_ctl)
services_start() { :; }
services_stop() { :; }
