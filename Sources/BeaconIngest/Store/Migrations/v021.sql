-- telemetry keyed by beacon: the beacon's key instead of its id in every row and index
--
-- A TLM transmission's row carried the beacon's text id (often 40-50 bytes) three times: in the row, in the
-- `(beacon_id, ts)` index and in each partition's `_transmission` unique index. `telemetry_raw` now keeps the
-- beacon's key from `beacon_keys` (the dictionary of the sighting packs) in all three places; the `telemetry`
-- and `sensor_readings` views show the same rows and columns, the id read from the dictionary.

INSERT INTO beaconflow.beacon_keys (beacon_id)
SELECT DISTINCT beacon_id FROM beaconflow.telemetry_raw
ON CONFLICT (beacon_id) DO NOTHING;

ALTER TABLE beaconflow.telemetry_raw ADD COLUMN beacon_key integer;
UPDATE beaconflow.telemetry_raw t SET beacon_key = b.beacon_key
FROM beaconflow.beacon_keys b WHERE b.beacon_id = t.beacon_id;
ALTER TABLE beaconflow.telemetry_raw ALTER COLUMN beacon_key SET NOT NULL;

CREATE OR REPLACE VIEW beaconflow.telemetry AS
    SELECT t.ts, b.beacon_id, t.battery_mv, t.temperature_c, t.adv_count, t.uptime_s, t.site_id, t.agent_id
    FROM beaconflow.telemetry_raw t
    JOIN beaconflow.beacon_keys b ON b.beacon_key = t.beacon_key;

CREATE OR REPLACE VIEW beaconflow.sensor_readings AS
    SELECT ts, site_id, agent_id, beacon_id, quantity, value, unit
    FROM beaconflow.sensor_readings_raw
    UNION ALL
    SELECT t.ts, t.site_id, t.agent_id, b.beacon_id, q.quantity, q.value, q.unit
    FROM beaconflow.telemetry_raw t
    JOIN beaconflow.beacon_keys b ON b.beacon_key = t.beacon_key
    CROSS JOIN LATERAL (VALUES ('battery_voltage', t.battery_mv::double precision, 'millivolt'),
                               ('temperature', t.temperature_c::double precision, 'celsius'),
                               ('advertising_count', t.adv_count::double precision, 'count'),
                               ('uptime', t.uptime_s, 'second')) AS q(quantity, value, unit)
    WHERE t.site_id IS NOT NULL AND t.agent_id IS NOT NULL AND q.value IS NOT NULL;

-- The indexes again on the key (dropping the column drops those on the id; the migration's transaction holds
-- the table meanwhile).
ALTER TABLE beaconflow.telemetry_raw DROP COLUMN beacon_id;
DO $$
DECLARE
    partition record;
BEGIN
    FOR partition IN
        SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'beaconflow.telemetry_raw'::regclass
    LOOP
        EXECUTE format('CREATE UNIQUE INDEX %I ON beaconflow.%I (beacon_key, adv_count, uptime_s)',
                       partition.relname || '_transmission', partition.relname);
    END LOOP;
END
$$;
CREATE INDEX ON beaconflow.telemetry_raw (beacon_key, ts);

CREATE OR REPLACE FUNCTION beaconflow.make_partitions(first_day date, days integer) RETURNS integer
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
                    EXECUTE format('CREATE UNIQUE INDEX %I ON beaconflow.%I (beacon_key, adv_count, uptime_s)',
                                   name || '_transmission', name);
                END IF;
                made := made + 1;
            END IF;
        END LOOP;
    END LOOP;
    RETURN made;
END
$$;
