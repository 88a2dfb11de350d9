-- tables, partitions, roles and the public views

-- Roles are cluster-wide and NOLOGIN: operators grant them to their login roles
-- (GRANT beaconflow_writer TO ingest_login; GRANT beaconflow_reader TO grafana).
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'beaconflow_writer') THEN
        CREATE ROLE beaconflow_writer NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'beaconflow_reader') THEN
        CREATE ROLE beaconflow_reader NOLOGIN;
    END IF;
END
$$;

CREATE TABLE beaconflow.settings (
    key text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO beaconflow.settings (key, value) VALUES
    ('retention_days', '30'),
    ('partitions_ahead_days', '3'),
    ('stale_after_minutes', '15');

-- One row per committed batch. Sequences run on across an agent's restarts, so (site, agent, sequence)
-- recognises a redelivered batch; boot_id says which run of the agent sent it.
CREATE TABLE beaconflow.batches (
    site_id text NOT NULL,
    agent_id text NOT NULL,
    sequence bigint NOT NULL,
    boot_id bigint NOT NULL,
    agent_clock timestamptz,
    sightings integer NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (site_id, agent_id, sequence)
);

-- Batches refused at intake, kept whole with the reason.
CREATE TABLE beaconflow.rejected_batches (
    received_at timestamptz NOT NULL DEFAULT now(),
    topic text NOT NULL,
    reason text NOT NULL,
    payload bytea NOT NULL
);

-- Raw rows, partitioned by UTC day (beaconflow.ensure_partitions creates them ahead).
CREATE TABLE beaconflow.sightings_raw (
    ts timestamptz NOT NULL,
    site_id text NOT NULL,
    agent_id text NOT NULL,
    zone_id text,
    beacon_id text NOT NULL,
    rssi smallint NOT NULL,
    tx_power smallint,
    distance_m real,
    smoothed_distance_m real
) PARTITION BY RANGE (ts);
CREATE INDEX ON beaconflow.sightings_raw (beacon_id, ts);
CREATE INDEX ON beaconflow.sightings_raw (site_id, ts);

CREATE TABLE beaconflow.telemetry_raw (
    ts timestamptz NOT NULL,
    beacon_id text NOT NULL,
    battery_mv integer,
    temperature_c real,
    adv_count bigint,
    uptime_s double precision,
    site_id text,
    agent_id text
) PARTITION BY RANGE (ts);
CREATE INDEX ON beaconflow.telemetry_raw (beacon_id, ts);

CREATE TABLE beaconflow.visits_raw (
    site_id text NOT NULL,
    zone_id text NOT NULL,
    beacon_id text NOT NULL,
    enter_ts timestamptz NOT NULL,
    exit_ts timestamptz,
    PRIMARY KEY (site_id, beacon_id, enter_ts)
);
CREATE INDEX ON beaconflow.visits_raw (site_id, zone_id, enter_ts);

CREATE TABLE beaconflow.zone_occupancy_minute (
    site_id text NOT NULL,
    zone_id text NOT NULL,
    bucket timestamptz NOT NULL,
    occupants integer NOT NULL,
    PRIMARY KEY (site_id, zone_id, bucket)
);

CREATE TABLE beaconflow.beacon_state (
    beacon_id text PRIMARY KEY,
    site_id text,
    last_seen timestamptz,
    battery_mv integer,
    battery_trend_mv_per_day real,
    est_days_left real,
    temperature_c real,
    reboots_7d integer NOT NULL DEFAULT 0,
    status text NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'low_battery', 'stale', 'rebooting'))
);

CREATE TABLE beaconflow.agent_state (
    site_id text NOT NULL,
    agent_id text NOT NULL,
    online boolean NOT NULL DEFAULT false,
    last_batch_at timestamptz,
    adverts_per_s real,
    spool_bytes bigint,
    clock_offset_ms real,
    last_error text,
    PRIMARY KEY (site_id, agent_id)
);

-- Daily partitions of the raw tables for `days` days from `first_day` (UTC); returns how many it made.
-- SECURITY DEFINER: the writer role may call it without owning the tables.
CREATE FUNCTION beaconflow.ensure_partitions(first_day date, days integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
    parent text;
    day date;
    made integer := 0;
BEGIN
    FOREACH parent IN ARRAY ARRAY['sightings_raw', 'telemetry_raw'] LOOP
        FOR offset_days IN 0 .. greatest(days, 1) - 1 LOOP
            day := first_day + offset_days;
            IF to_regclass(format('beaconflow.%I', parent || '_' || to_char(day, 'YYYYMMDD'))) IS NULL THEN
                EXECUTE format(
                    'CREATE TABLE beaconflow.%I PARTITION OF beaconflow.%I FOR VALUES FROM (%L) TO (%L)',
                    parent || '_' || to_char(day, 'YYYYMMDD'), parent,
                    day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC');
                made := made + 1;
            END IF;
        END LOOP;
    END LOOP;
    RETURN made;
END
$$;

-- Drops the raw partitions of days before `cutoff` (UTC); returns how many it dropped.
CREATE FUNCTION beaconflow.drop_partitions_before(cutoff date) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
    partition record;
    dropped integer := 0;
BEGIN
    FOR partition IN
        SELECT child.relname
        FROM pg_inherits
        JOIN pg_class child ON child.oid = pg_inherits.inhrelid
        JOIN pg_class parent ON parent.oid = pg_inherits.inhparent
        JOIN pg_namespace ns ON ns.oid = parent.relnamespace
        WHERE ns.nspname = 'beaconflow' AND parent.relname IN ('sightings_raw', 'telemetry_raw')
          AND right(child.relname, 8) ~ '^[0-9]{8}$'
          AND to_date(right(child.relname, 8), 'YYYYMMDD') < cutoff
    LOOP
        EXECUTE format('DROP TABLE beaconflow.%I', partition.relname);
        dropped := dropped + 1;
    END LOOP;
    RETURN dropped;
END
$$;

-- The public views (the contract of docs/schema.md).
CREATE VIEW beaconflow.sightings AS
    SELECT ts, site_id, agent_id, zone_id, beacon_id, rssi, tx_power, distance_m, smoothed_distance_m
    FROM beaconflow.sightings_raw;

CREATE VIEW beaconflow.telemetry AS
    SELECT ts, beacon_id, battery_mv, temperature_c, adv_count, uptime_s
    FROM beaconflow.telemetry_raw;

-- dwell_s is null while the visit is open (exit_ts null).
CREATE VIEW beaconflow.visits AS
    SELECT site_id, zone_id, beacon_id, enter_ts, exit_ts,
           extract(epoch FROM exit_ts - enter_ts)::double precision AS dwell_s
    FROM beaconflow.visits_raw;

CREATE VIEW beaconflow.zone_occupancy AS
    SELECT site_id, zone_id, bucket, occupants
    FROM beaconflow.zone_occupancy_minute;

CREATE VIEW beaconflow.zone_occupancy_hourly AS
    WITH hours AS (
        SELECT site_id, zone_id, date_trunc('hour', bucket) AS bucket,
               avg(occupants)::double precision AS avg_occupants, max(occupants) AS peak_occupants
        FROM beaconflow.zone_occupancy_minute
        GROUP BY 1, 2, 3
    )
    SELECT h.site_id, h.zone_id, h.bucket, h.avg_occupants, h.peak_occupants,
           (SELECT count(*) FROM beaconflow.visits_raw v
            WHERE v.site_id = h.site_id AND v.zone_id = h.zone_id
              AND v.enter_ts >= h.bucket AND v.enter_ts < h.bucket + interval '1 hour') AS visits
    FROM hours h;

CREATE VIEW beaconflow.beacon_health AS
    SELECT beacon_id, site_id, last_seen, battery_mv, battery_trend_mv_per_day, est_days_left, temperature_c,
           reboots_7d,
           CASE WHEN last_seen < now() - (SELECT value::integer FROM beaconflow.settings
                                          WHERE key = 'stale_after_minutes') * interval '1 minute'
                THEN 'stale' ELSE status END AS status
    FROM beaconflow.beacon_state;

CREATE VIEW beaconflow.agent_health AS
    SELECT site_id, agent_id, online, last_batch_at, adverts_per_s, spool_bytes, clock_offset_ms, last_error
    FROM beaconflow.agent_state;

-- Least privilege: the writer writes the tables, the reader reads the views only.
GRANT USAGE ON SCHEMA beaconflow TO beaconflow_writer, beaconflow_reader;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA beaconflow TO beaconflow_writer;
ALTER DEFAULT PRIVILEGES IN SCHEMA beaconflow GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO beaconflow_writer;
REVOKE ALL ON FUNCTION beaconflow.ensure_partitions(date, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION beaconflow.drop_partitions_before(date) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION beaconflow.ensure_partitions(date, integer) TO beaconflow_writer;
GRANT EXECUTE ON FUNCTION beaconflow.drop_partitions_before(date) TO beaconflow_writer;
GRANT SELECT ON beaconflow.sightings, beaconflow.telemetry, beaconflow.visits, beaconflow.zone_occupancy,
    beaconflow.zone_occupancy_hourly, beaconflow.beacon_health, beaconflow.agent_health TO beaconflow_reader;
