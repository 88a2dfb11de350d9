-- packed sightings, per-minute rollups and stored hourly occupancy
--
-- Sightings are stored packed: one `sighting_packs` row holds what one agent heard of one beacon within one
-- UTC minute of one batch, its readings in a `bigint[]` (`SightingPack.Reading`: microseconds after the row's
-- `ts`, the RSSI, the smoothed RSSI in hundredths of a dB). Sites, agents, zones and beacons are integer keys
-- into append-only dictionaries; the distances are computed by the views from the RSSI, the frame's power and
-- the agent's placement (its offset and path-loss exponent, part of the source key). Rows stored before this
-- version stay in `sightings_raw` until their partitions expire; `sightings` shows both, unchanged.
-- `sighting_minutes` keeps per-minute counts and RSSI per (beacon, agent) for `rollup_retention_days`, and
-- `zone_occupancy_hour` stores the hourly rollup that the view used to compute on every query.

INSERT INTO beaconflow.settings (key, value) VALUES ('rollup_retention_days', '400');

CREATE TABLE beaconflow.sighting_sources (
    source_key integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    site_id text NOT NULL,
    agent_id text NOT NULL,
    zone_id text,
    rssi_offset_db double precision,
    path_loss_exponent double precision
);
CREATE UNIQUE INDEX sighting_sources_identity ON beaconflow.sighting_sources
    (site_id, agent_id, coalesce(zone_id, ''), (zone_id IS NULL), coalesce(rssi_offset_db, 'NaN'),
     coalesce(path_loss_exponent, 'NaN'));
CREATE INDEX ON beaconflow.sighting_sources (site_id);

CREATE TABLE beaconflow.beacon_keys (
    beacon_key integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    beacon_id text NOT NULL UNIQUE
);

CREATE TABLE beaconflow.sighting_packs (
    ts timestamptz NOT NULL,
    source_key integer NOT NULL,
    beacon_key integer NOT NULL,
    tx_power smallint,
    readings bigint[] NOT NULL
) PARTITION BY RANGE (ts);
CREATE INDEX ON beaconflow.sighting_packs (beacon_key, ts);
CREATE INDEX ON beaconflow.sighting_packs USING brin (ts);

CREATE TABLE beaconflow.sighting_minutes (
    minute timestamptz NOT NULL,
    source_key integer NOT NULL,
    beacon_key integer NOT NULL,
    sightings integer NOT NULL,
    rssi_min smallint NOT NULL,
    rssi_max smallint NOT NULL,
    rssi_sum bigint NOT NULL,
    PRIMARY KEY (beacon_key, minute, source_key)
);
CREATE INDEX ON beaconflow.sighting_minutes USING brin (minute);

CREATE TABLE beaconflow.zone_occupancy_hour (
    site_id text NOT NULL,
    zone_id text NOT NULL,
    bucket timestamptz NOT NULL,
    avg_occupants double precision NOT NULL,
    peak_occupants integer NOT NULL,
    visits bigint NOT NULL,
    PRIMARY KEY (site_id, zone_id, bucket)
);

GRANT SELECT, INSERT ON beaconflow.sighting_sources, beaconflow.beacon_keys, beaconflow.sighting_packs
    TO beaconflow_writer;
GRANT SELECT, INSERT, UPDATE ON beaconflow.sighting_minutes, beaconflow.zone_occupancy_hour TO beaconflow_writer;
REVOKE UPDATE, DELETE ON beaconflow.sighting_sources, beaconflow.beacon_keys, beaconflow.sighting_packs
    FROM beaconflow_writer;
REVOKE DELETE ON beaconflow.sighting_minutes, beaconflow.zone_occupancy_hour FROM beaconflow_writer;

-- Partitions of the days that already have sightings, so that late data of those days has a place.
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
    FOREACH parent IN ARRAY ARRAY['sighting_packs', 'telemetry_raw', 'sensor_readings_raw'] LOOP
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

-- Drops the raw partitions (sightings stored before version 9 included) of days before `cutoff`, and the
-- per-minute rollups older than their own retention; returns the number of partitions dropped.
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
          AND parent.relname IN ('sighting_packs', 'sightings_raw', 'telemetry_raw', 'sensor_readings_raw')
          AND right(child.relname, 8) ~ '^[0-9]{8}$'
          AND to_date(right(child.relname, 8), 'YYYYMMDD') < cutoff
    LOOP
        EXECUTE format('DROP TABLE beaconflow.%I', partition.relname);
        dropped := dropped + 1;
    END LOOP;
    DELETE FROM beaconflow.sighting_minutes
    WHERE minute < now() - (SELECT value::integer FROM beaconflow.settings
                            WHERE key = 'rollup_retention_days') * interval '1 day';
    RETURN dropped;
END
$$;

SELECT beaconflow.ensure_partitions(to_date(right(c.relname, 8), 'YYYYMMDD'), 1)
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'beaconflow.sightings_raw'::regclass AND right(c.relname, 8) ~ '^[0-9]{8}$';

-- The rows stored before this version, in the dictionaries (their placement is unknown: null) and rolled up.
INSERT INTO beaconflow.sighting_sources (site_id, agent_id, zone_id)
    SELECT DISTINCT site_id, agent_id, zone_id FROM beaconflow.sightings_raw;
INSERT INTO beaconflow.beacon_keys (beacon_id) SELECT DISTINCT beacon_id FROM beaconflow.sightings_raw;
INSERT INTO beaconflow.sighting_minutes (minute, source_key, beacon_key, sightings, rssi_min, rssi_max, rssi_sum)
    SELECT date_trunc('minute', r.ts AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', s.source_key, b.beacon_key,
           count(*), min(r.rssi), max(r.rssi), sum(r.rssi)
    FROM beaconflow.sightings_raw r
    JOIN beaconflow.sighting_sources s ON s.site_id = r.site_id AND s.agent_id = r.agent_id
         AND s.zone_id IS NOT DISTINCT FROM r.zone_id AND s.rssi_offset_db IS NULL
    JOIN beaconflow.beacon_keys b ON b.beacon_id = r.beacon_id
    GROUP BY 1, 2, 3;

-- Every sighting with `stored_ts`, the time of the row that holds it (its own time for rows stored before
-- version 9; its pack's first sighting otherwise, at most a minute earlier): a condition on stored_ts
-- reaches the tables' indexes and partitions, one on ts (computed) cannot.
CREATE VIEW beaconflow.sighting_readings AS
    SELECT ts AS stored_ts, ts, site_id, agent_id, zone_id, beacon_id, rssi, tx_power, distance_m,
           smoothed_distance_m
    FROM beaconflow.sightings_raw
    UNION ALL
    SELECT p.ts, p.ts + (r.reading >> 24) * interval '1 microsecond', s.site_id, s.agent_id, s.zone_id,
           b.beacon_id, (((r.reading >> 16) & 255) - 128)::smallint, p.tx_power,
           power(10, (p.tx_power - ((((r.reading >> 16) & 255) - 128) + s.rssi_offset_db))
                     / (10 * s.path_loss_exponent))::real,
           power(10, (p.tx_power - ((r.reading & 65535) - 32768) / 100.0::double precision)
                     / (10 * s.path_loss_exponent))::real
    FROM beaconflow.sighting_packs p
    JOIN beaconflow.sighting_sources s ON s.source_key = p.source_key
    JOIN beaconflow.beacon_keys b ON b.beacon_key = p.beacon_key
    CROSS JOIN LATERAL unnest(p.readings) AS r(reading);

CREATE OR REPLACE VIEW beaconflow.sightings AS
    SELECT ts, site_id, agent_id, zone_id, beacon_id, rssi, tx_power, distance_m, smoothed_distance_m
    FROM beaconflow.sighting_readings;

-- The sightings of [from_ts, until_ts): the view's rows, reading only the rows stored in that window (a
-- pack lies within one UTC minute). Inlined into the calling query, whose other conditions (site, beacon)
-- reach the indexes as well.
CREATE FUNCTION beaconflow.sightings_between(from_ts timestamptz, until_ts timestamptz)
RETURNS TABLE (ts timestamptz, site_id text, agent_id text, zone_id text, beacon_id text, rssi smallint,
               tx_power smallint, distance_m real, smoothed_distance_m real)
LANGUAGE sql STABLE AS $$
    SELECT r.ts, r.site_id, r.agent_id, r.zone_id, r.beacon_id, r.rssi, r.tx_power, r.distance_m,
           r.smoothed_distance_m
    FROM beaconflow.sighting_readings r
    WHERE r.stored_ts > from_ts - interval '1 minute' AND r.stored_ts < until_ts AND r.ts >= from_ts AND r.ts < until_ts
$$;

CREATE VIEW beaconflow.sightings_minute AS
    SELECT m.minute, s.site_id, s.agent_id, s.zone_id, b.beacon_id, m.sightings, m.rssi_min,
           (m.rssi_sum::double precision / m.sightings) AS rssi_mean, m.rssi_max
    FROM beaconflow.sighting_minutes m
    JOIN beaconflow.sighting_sources s ON s.source_key = m.source_key
    JOIN beaconflow.beacon_keys b ON b.beacon_key = m.beacon_key;

-- Recomputes the stored hourly rows of the given (site, zone, UTC hour) from their minutes and visits; the
-- writer calls it for the hours whose minutes or visits a transaction changed. Returns the rows written.
CREATE FUNCTION beaconflow.refresh_zone_hours(sites text[], zones text[], hours timestamptz[]) RETURNS integer
LANGUAGE sql AS $$
    WITH keys AS (
        SELECT DISTINCT site_id, zone_id,
               date_trunc('hour', bucket AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS bucket
        FROM unnest(sites, zones, hours) AS k(site_id, zone_id, bucket)
    ), computed AS (
        SELECT k.site_id, k.zone_id, k.bucket,
               (sum(coalesce(m.occupant_seconds, m.occupants * 60.0)) / (60.0 * count(*)))::double precision,
               max(m.occupants),
               (SELECT count(*) FROM beaconflow.visits_raw v
                WHERE v.site_id = k.site_id AND v.zone_id = k.zone_id
                  AND v.enter_ts >= k.bucket AND v.enter_ts < k.bucket + interval '1 hour')
        FROM keys k
        JOIN beaconflow.zone_occupancy_minute m ON m.site_id = k.site_id AND m.zone_id = k.zone_id
             AND m.bucket >= k.bucket AND m.bucket < k.bucket + interval '1 hour'
        GROUP BY k.site_id, k.zone_id, k.bucket
    ), written AS (
        INSERT INTO beaconflow.zone_occupancy_hour (site_id, zone_id, bucket, avg_occupants, peak_occupants, visits)
        SELECT * FROM computed
        ON CONFLICT (site_id, zone_id, bucket) DO UPDATE SET avg_occupants = excluded.avg_occupants,
            peak_occupants = excluded.peak_occupants, visits = excluded.visits
        RETURNING 1
    )
    SELECT count(*)::integer FROM written
$$;
REVOKE ALL ON FUNCTION beaconflow.refresh_zone_hours(text[], text[], timestamptz[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION beaconflow.refresh_zone_hours(text[], text[], timestamptz[]) TO beaconflow_writer;

SELECT beaconflow.refresh_zone_hours(array_agg(site_id), array_agg(zone_id), array_agg(bucket))
FROM (SELECT DISTINCT site_id, zone_id, date_trunc('hour', bucket AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS bucket
      FROM beaconflow.zone_occupancy_minute) hours;

CREATE OR REPLACE VIEW beaconflow.zone_occupancy_hourly AS
    SELECT site_id, zone_id, bucket, avg_occupants, peak_occupants, visits
    FROM beaconflow.zone_occupancy_hour;

GRANT SELECT ON beaconflow.sightings_minute, beaconflow.sighting_readings TO beaconflow_reader;
REVOKE ALL ON FUNCTION beaconflow.sightings_between(timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION beaconflow.sightings_between(timestamptz, timestamptz)
    TO beaconflow_reader, beaconflow_writer;
