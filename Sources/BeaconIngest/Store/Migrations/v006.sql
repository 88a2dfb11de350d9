-- bounded partition functions and rejected payloads
--
-- What the ingest's role may do through the SECURITY DEFINER functions is bounded: partitions are made by one
-- session at a time (two instances no longer race to create the same one), at most 62 days per call, and
-- none are dropped that are newer than the retention. A rejected batch keeps its first 64 KiB and its size;
-- the ingest prunes rejections older than the retention.

ALTER TABLE beaconflow.rejected_batches ADD COLUMN payload_bytes integer;
UPDATE beaconflow.rejected_batches SET payload_bytes = length(payload);
UPDATE beaconflow.rejected_batches SET payload = substring(payload FROM 1 FOR 65536) WHERE length(payload) > 65536;

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
    -- One session at a time: a second one waits, then finds the tables made.
    PERFORM pg_advisory_xact_lock(1650880116);  -- 'bfpa'
    FOREACH parent IN ARRAY ARRAY['sightings_raw', 'telemetry_raw'] LOOP
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

-- The retention is the owner's to set.
REVOKE INSERT, UPDATE, DELETE ON beaconflow.settings FROM beaconflow_writer;
