-- a TLM transmission is its counters and its time, not its counters alone
--
-- A beacon that reboots twice in a day (a cell browning out does it again and again) sends the same advertising
-- count and uptime after each boot: distinct transmissions, which each day partition's unique index on
-- `(beacon_key, adv_count, uptime_s)` refused after the first. A transmission is now the beacon, its counters and a
-- time within the receptions' spread of each other (5 minutes: agents' capture times and clock offsets), checked
-- by the ingest under its per-beacon locks against the `(beacon_key, ts)` index; the unique indexes go.

DO $$
DECLARE
    partition record;
BEGIN
    FOR partition IN
        SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'beaconflow.telemetry_raw'::regclass
    LOOP
        EXECUTE format('DROP INDEX IF EXISTS beaconflow.%I', partition.relname || '_transmission');
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION beaconflow.make_partitions(first_day date, days integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog SET lock_timeout = '1s' AS $$
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
                    'CREATE TABLE beaconflow.%I (LIKE beaconflow.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS '
                    'INCLUDING STORAGE INCLUDING COMPRESSION)', name, parent);
                EXECUTE format(
                    'ALTER TABLE beaconflow.%I ATTACH PARTITION beaconflow.%I FOR VALUES FROM (%L) TO (%L)',
                    parent, name, day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC');
                made := made + 1;
            END IF;
        END LOOP;
    END LOOP;
    RETURN made;
END
$$;
