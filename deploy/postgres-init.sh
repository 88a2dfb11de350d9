#!/bin/sh
# First start of the compose PostgreSQL: the beaconflow roles (the ingest's migrations find them there) and a
# login role for Grafana that may read the public views only.
set -eu
grafana_password=$(cat /run/secrets/grafana-db-password)
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<SQL
CREATE ROLE beaconflow_writer NOLOGIN;
CREATE ROLE beaconflow_reader NOLOGIN;
CREATE ROLE grafana LOGIN PASSWORD '$grafana_password' IN ROLE beaconflow_reader;
SQL
