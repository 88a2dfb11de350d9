-- one telemetry row per transmission
--
-- One `telemetry` row per TLM transmission, enforced by the database: each daily partition has a unique index
-- on what identifies a transmission, the beacon and the frame's own advertising counter and uptime (the same
-- bytes for every agent that heard it; a reboot restarts both, so they do not repeat). Existing duplicates are
-- removed (the earliest reception stays) before the indexes are made. Rows within a few minutes of a UTC
-- midnight are also checked against the neighbouring day by the writer (`TransmissionStore.telemetry`).

DO $$
DECLARE
    partition record;
BEGIN
    FOR partition IN
        SELECT child.relname
        FROM pg_inherits
        JOIN pg_class child ON child.oid = pg_inherits.inhrelid
        JOIN pg_class parent ON parent.oid = pg_inherits.inhparent
        JOIN pg_namespace ns ON ns.oid = parent.relnamespace
        WHERE ns.nspname = 'beaconflow' AND parent.relname = 'telemetry_raw'
    LOOP
        EXECUTE format(
            'DELETE FROM beaconflow.%1$I a USING beaconflow.%1$I b
             WHERE a.beacon_id = b.beacon_id AND a.adv_count = b.adv_count AND a.uptime_s = b.uptime_s
               AND (a.ts, a.ctid) > (b.ts, b.ctid)', partition.relname);
        EXECUTE format('CREATE UNIQUE INDEX %I ON beaconflow.%I (beacon_id, adv_count, uptime_s)',
                       partition.relname || '_transmission', partition.relname);
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION beaconflow.ensure_partitions(first_day date, days integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
    parent text;
    name text;
    day date;
    made integer := 0;
BEGIN
    FOREACH parent IN ARRAY ARRAY['sightings_raw', 'telemetry_raw'] LOOP
        FOR offset_days IN 0 .. greatest(days, 1) - 1 LOOP
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
