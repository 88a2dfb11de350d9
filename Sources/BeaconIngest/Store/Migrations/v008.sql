-- sensor readings, device information and the beacon registry
--
-- Every reading of every data frame (Eddystone TLM, Ruuvi, BTHome, ATC/pvvx, GATT service data) and GATT poll,
-- once per transmission: `frame_hash` identifies the frame's bytes, and the writer looks for the same beacon and
-- hash within the transmission's tolerance before inserting (under a per-beacon lock, so instances agree).
-- Device Information strings keep their latest value per beacon. The sites file's registry (labels; never keys)
-- is written by the ingest at start. `beacon_state` learns the beacon's kind and first sighting, and battery
-- levels in percent for beacons that report no voltage.

CREATE TABLE beaconflow.sensor_readings_raw (
    ts timestamptz NOT NULL,
    site_id text NOT NULL,
    agent_id text NOT NULL,
    beacon_id text NOT NULL,
    quantity text NOT NULL,
    value double precision NOT NULL,
    unit text NOT NULL,
    frame_hash bigint NOT NULL
) PARTITION BY RANGE (ts);
CREATE INDEX ON beaconflow.sensor_readings_raw (beacon_id, frame_hash, ts);
CREATE INDEX ON beaconflow.sensor_readings_raw (site_id, ts);

CREATE TABLE beaconflow.device_info_state (
    beacon_id text NOT NULL,
    name text NOT NULL,
    value text NOT NULL,
    site_id text NOT NULL,
    agent_id text NOT NULL,
    read_at timestamptz NOT NULL,
    PRIMARY KEY (beacon_id, name)
);

CREATE TABLE beaconflow.beacon_registry (
    beacon_id text PRIMARY KEY,
    label text,
    identity_key boolean NOT NULL DEFAULT false,
    bthome_bindkey boolean NOT NULL DEFAULT false
);
GRANT SELECT, INSERT, UPDATE, DELETE ON beaconflow.beacon_registry TO beaconflow_writer;
GRANT SELECT, INSERT, UPDATE ON beaconflow.device_info_state TO beaconflow_writer;
GRANT SELECT, INSERT ON beaconflow.sensor_readings_raw TO beaconflow_writer;

ALTER TABLE beaconflow.beacon_state
    ADD COLUMN kind text,
    ADD COLUMN first_seen timestamptz,
    ADD COLUMN battery_pct real,
    ADD COLUMN battery_trend_pct_per_day real;

CREATE OR REPLACE FUNCTION beaconflow.ensure_partitions(first_day date, days integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
    parent text;
    name text;
    day date;
    made integer := 0;
BEGIN
    IF days IS NULL OR days < 1 OR days > 62 THEN
        RAISE EXCEPTION 'ensure_partitions: days must be 1 to 62, not %', days USING ERRCODE = '22023';
    END IF;
    IF first_day IS NULL OR first_day < date '2000-01-01' OR first_day > date '2200-01-01' THEN
        RAISE EXCEPTION 'ensure_partitions: first_day % is not between 2000 and 2200', first_day USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(1650880116);  -- 'bfpa'
    FOREACH parent IN ARRAY ARRAY['sightings_raw', 'telemetry_raw', 'sensor_readings_raw'] LOOP
        FOR offset_days IN 0 .. days - 1 LOOP
            day := first_day + offset_days;
            name := parent || '_' || to_char(day, 'YYYYMMDD');
            IF to_regclass(format('beaconflow.%I', name)) IS NULL THEN
                EXECUTE format(
                    'CREATE TABLE beaconflow.%I PARTITION OF beaconflow.%I FOR VALUES FROM (%L) TO (%L)',
                    name, parent, day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC');
                IF parent = 'telemetry_raw' THEN
                    EXECUTE format('CREATE UNIQUE INDEX %I ON beaconflow.%I (beacon_id, adv_count, uptime_s)',
                                   name || '_transmission', name);
                END IF;
                made := made + 1;
            END IF;
        END LOOP;
    END LOOP;
    RETURN made;
END
$$;

CREATE OR REPLACE FUNCTION beaconflow.drop_partitions_before(cutoff date) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
    partition record;
    dropped integer := 0;
    newest_allowed date;
BEGIN
    SELECT (now() AT TIME ZONE 'UTC')::date - value::integer INTO newest_allowed
    FROM beaconflow.settings WHERE key = 'retention_days';
    IF cutoff IS NULL OR newest_allowed IS NULL OR cutoff > newest_allowed THEN
        RAISE EXCEPTION 'drop_partitions_before: % is newer than the retention allows (%)', cutoff, newest_allowed
            USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(1650880116);
    FOR partition IN
        SELECT child.relname
        FROM pg_inherits
        JOIN pg_class child ON child.oid = pg_inherits.inhrelid
        JOIN pg_class parent ON parent.oid = pg_inherits.inhparent
        JOIN pg_namespace ns ON ns.oid = parent.relnamespace
        WHERE ns.nspname = 'beaconflow'
          AND parent.relname IN ('sightings_raw', 'telemetry_raw', 'sensor_readings_raw')
          AND right(child.relname, 8) ~ '^[0-9]{8}$'
          AND to_date(right(child.relname, 8), 'YYYYMMDD') < cutoff
    LOOP
        EXECUTE format('DROP TABLE beaconflow.%I', partition.relname);
        dropped := dropped + 1;
    END LOOP;
    RETURN dropped;
END
$$;

-- Partitions of the days the other raw tables already have, so that late data of those days has a place.
SELECT beaconflow.ensure_partitions(to_date(right(c.relname, 8), 'YYYYMMDD'), 1)
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'beaconflow.sightings_raw'::regclass AND right(c.relname, 8) ~ '^[0-9]{8}$';

CREATE VIEW beaconflow.sensor_readings AS
    SELECT ts, site_id, agent_id, beacon_id, quantity, value, unit
    FROM beaconflow.sensor_readings_raw;

CREATE VIEW beaconflow.device_info AS
    SELECT beacon_id, site_id, agent_id, name, value, read_at
    FROM beaconflow.device_info_state;

CREATE VIEW beaconflow.beacons AS
    SELECT coalesce(s.beacon_id, r.beacon_id) AS beacon_id, s.site_id, r.label,
           coalesce(s.kind, CASE WHEN r.bthome_bindkey THEN 'bthome' END) AS kind,
           s.first_seen, s.last_seen,
           CASE WHEN coalesce(s.beacon_id, r.beacon_id) LIKE 'mac:%' THEN 'address'
                WHEN coalesce(s.beacon_id, r.beacon_id) LIKE 'anon:%' THEN 'pseudonym'
                WHEN coalesce(s.beacon_id, r.beacon_id) LIKE 'eid:%' THEN 'unresolved_eid'
                WHEN r.identity_key THEN 'resolved_eid'
                ELSE 'frame' END AS identity_source
    FROM beaconflow.beacon_state s FULL JOIN beaconflow.beacon_registry r ON r.beacon_id = s.beacon_id;

CREATE OR REPLACE VIEW beaconflow.beacon_health AS
    SELECT beacon_id, site_id, last_seen, battery_mv, battery_trend_mv_per_day, est_days_left, temperature_c,
           reboots_7d,
           CASE WHEN last_seen < now() - (SELECT value::integer FROM beaconflow.settings
                                          WHERE key = 'stale_after_minutes') * interval '1 minute'
                THEN 'stale' ELSE status END AS status,
           battery_pct, battery_trend_pct_per_day
    FROM beaconflow.beacon_state;

GRANT SELECT ON beaconflow.sensor_readings, beaconflow.device_info, beaconflow.beacons TO beaconflow_reader;
