#!/bin/sh
# First start of the compose PostgreSQL: the beaconflow roles (the migrations find them there), the ingest's login
# (only in beaconflow_writer) and Grafana's (only in beaconflow_reader). POSTGRES_USER owns the schema and migrates.
set -eu
ingest_password=$(cat /run/secrets/ingest-db-password)
grafana_password=$(cat /run/secrets/grafana-db-password)
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<SQL
CREATE ROLE beaconflow_writer NOLOGIN;
CREATE ROLE beaconflow_reader NOLOGIN;
CREATE ROLE ingest LOGIN PASSWORD '$ingest_password' IN ROLE beaconflow_writer;
CREATE ROLE grafana LOGIN PASSWORD '$grafana_password' IN ROLE beaconflow_reader;
-- A reader's session left in a transaction or a runaway query never keeps retention waiting for long.
ALTER ROLE grafana SET idle_in_transaction_session_timeout = '10min';
ALTER ROLE grafana SET statement_timeout = '5min';
SQL
