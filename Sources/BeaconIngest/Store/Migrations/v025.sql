-- partitions attached without a lock a reader can hold; partition DDL waits at most a second
--
-- `CREATE TABLE ... PARTITION OF` takes ACCESS EXCLUSIVE on the parent: it waited behind any reader's open
-- transaction on a view over the raw tables, and every writer's insert queued behind it. A day's partition is now
-- made as a table of its own and attached: `ATTACH PARTITION` takes SHARE UPDATE EXCLUSIVE on the parent, which
-- neither readers (ACCESS SHARE) nor writers (ROW EXCLUSIVE) conflict with. Dropping an expired partition still
-- needs ACCESS EXCLUSIVE on its parent: each drop gives up after `lock_timeout` (1 s), the partitions a reader
-- holds are left for the next maintenance, and the others are dropped.

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
                IF parent = 'telemetry_raw' THEN
                    EXECUTE format('CREATE UNIQUE INDEX %I ON beaconflow.%I (beacon_key, adv_count, uptime_s)',
                                   name || '_transmission', name);
                END IF;
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

CREATE OR REPLACE FUNCTION beaconflow.drop_partitions_before(cutoff date) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog SET lock_timeout = '1s' AS $$
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
        BEGIN
            EXECUTE format('DROP TABLE beaconflow.%I', partition.relname);
            dropped := dropped + 1;
        EXCEPTION WHEN lock_not_available THEN
            -- A reader holds it: left for the next maintenance.
            NULL;
        END;
    END LOOP;
    DELETE FROM beaconflow.sighting_minutes
    WHERE minute < now() - (SELECT value::integer FROM beaconflow.settings
                            WHERE key = 'rollup_retention_days') * interval '1 day';
    RETURN dropped;
END
$$;
