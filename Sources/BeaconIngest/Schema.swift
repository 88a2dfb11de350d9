/// The `beaconflow` schema, as versioned migrations (docs/schema.md). The views at the end of migration 1 are the
/// public contract: users and dashboards query them, so their names and columns only ever grow.
enum Schema {
    static let migrations: [Migration] = [
        Migration(version: 1, name: "tables, partitions, roles and the public views", sql: version1),
        Migration(version: 2, name: "acknowledged progress per agent", sql: version2),
        Migration(version: 3, name: "silent agents", sql: version3),
        Migration(version: 4, name: "one telemetry row per transmission", sql: version4),
        Migration(version: 5, name: "occupancy by majority of the minute, with occupant seconds", sql: version5),
        Migration(version: 6, name: "bounded partition functions and rejected payloads", sql: version6),
        Migration(version: 7, name: "zone checkpoints; the writer appends raw rows only", sql: version7),
        Migration(version: 8, name: "sensor readings, device information and the beacon registry", sql: version8),
    ]

    /// Every reading of every data frame (Eddystone TLM, Ruuvi, BTHome, ATC/pvvx, GATT service data) and GATT poll,
    /// once per transmission: `frame_hash` identifies the frame's bytes, and the writer looks for the same beacon and
    /// hash within the transmission's tolerance before inserting (under a per-beacon lock, so instances agree).
    /// Device Information strings keep their latest value per beacon. The sites file's registry (labels; never keys)
    /// is written by the ingest at start. `beacon_state` learns the beacon's kind and first sighting, and battery
    /// levels in percent for beacons that report no voltage.
    static let version8 = #"""
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
        """#

    /// Each site's zone state as of its watermark, saved in the transaction that counted its minutes: a restarted
    /// ingest resumes from it and reads back the sightings stored after it. The writer role appends raw rows and
    /// never changes or deletes them (nor those of the partitions made from now on: default privileges for both
    /// the role migrating and the owner of the partition function); it keeps UPDATE where it upserts.
    static let version7 = #"""
        CREATE TABLE beaconflow.zone_checkpoints (
            site_id text PRIMARY KEY,
            watermark timestamptz NOT NULL,
            saved_at timestamptz NOT NULL DEFAULT now(),
            state bytea NOT NULL
        );
        GRANT SELECT, INSERT, UPDATE ON beaconflow.zone_checkpoints TO beaconflow_writer;
        REVOKE DELETE ON beaconflow.zone_checkpoints FROM beaconflow_writer;

        REVOKE UPDATE, DELETE ON beaconflow.sightings_raw, beaconflow.telemetry_raw, beaconflow.batches FROM beaconflow_writer;
        REVOKE DELETE ON beaconflow.visits_raw, beaconflow.zone_occupancy_minute, beaconflow.agent_state,
            beaconflow.beacon_state FROM beaconflow_writer;
        DO $$
        DECLARE
            partition regclass;
            owner name := (SELECT pg_get_userbyid(proowner) FROM pg_proc
                           WHERE oid = 'beaconflow.ensure_partitions(date, integer)'::regprocedure);
        BEGIN
            FOR partition IN
                SELECT inhrelid::regclass FROM pg_inherits
                WHERE inhparent IN ('beaconflow.sightings_raw'::regclass, 'beaconflow.telemetry_raw'::regclass)
            LOOP
                EXECUTE format('REVOKE UPDATE, DELETE ON %s FROM beaconflow_writer', partition);
            END LOOP;
            IF pg_has_role(owner, 'MEMBER') THEN
                EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA beaconflow REVOKE UPDATE, DELETE ON TABLES FROM beaconflow_writer', owner);
            END IF;
        END
        $$;
        ALTER DEFAULT PRIVILEGES IN SCHEMA beaconflow REVOKE UPDATE, DELETE ON TABLES FROM beaconflow_writer;
        """#

    /// What the ingest's role may do through the SECURITY DEFINER functions is bounded: partitions are made by one
    /// session at a time (two instances no longer race to create the same one), at most 62 days per call, and
    /// none are dropped that are newer than the retention. A rejected batch keeps its first 64 KiB and its size;
    /// the ingest prunes rejections older than the retention.
    static let version6 = #"""
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
        """#

    /// A beacon counts in the zone where it spent at least half of the minute (so in one zone at most), and
    /// `occupant_seconds` sums every beacon's seconds of presence in the zone, so the average occupancy of any
    /// period is exact: the hourly rollup's `avg_occupants` is its seconds over the hour's counted seconds. Minutes
    /// counted before this version have no seconds (null); the rollup takes their count for the whole minute.
    static let version5 = """
        ALTER TABLE beaconflow.zone_occupancy_minute ADD COLUMN occupant_seconds double precision;

        CREATE OR REPLACE VIEW beaconflow.zone_occupancy AS
            SELECT site_id, zone_id, bucket, occupants, occupant_seconds
            FROM beaconflow.zone_occupancy_minute;

        CREATE OR REPLACE VIEW beaconflow.zone_occupancy_hourly AS
            WITH hours AS (
                SELECT site_id, zone_id, date_trunc('hour', bucket) AS bucket,
                       sum(coalesce(occupant_seconds, occupants * 60.0)) / (60.0 * count(*)) AS avg_occupants,
                       max(occupants) AS peak_occupants
                FROM beaconflow.zone_occupancy_minute
                GROUP BY 1, 2, 3
            )
            SELECT h.site_id, h.zone_id, h.bucket, h.avg_occupants::double precision AS avg_occupants, h.peak_occupants,
                   (SELECT count(*) FROM beaconflow.visits_raw v
                    WHERE v.site_id = h.site_id AND v.zone_id = h.zone_id
                      AND v.enter_ts >= h.bucket AND v.enter_ts < h.bucket + interval '1 hour') AS visits
            FROM hours h;
        """

    /// One `telemetry` row per TLM transmission, enforced by the database: each daily partition has a unique index
    /// on what identifies a transmission, the beacon and the frame's own advertising counter and uptime (the same
    /// bytes for every agent that heard it; a reboot restarts both, so they do not repeat). Existing duplicates are
    /// removed (the earliest reception stays) before the indexes are made. Rows within a few minutes of a UTC
    /// midnight are also checked against the neighbouring day by the writer (`BatchWriter.insertTelemetry`).
    static let version4 = #"""
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
        """#

    /// An agent online for `silent_after_minutes` without a batch is flagged in `agent_health.last_error` (the
    /// view's columns are a contract, so the flag is a `silent: ...` message ahead of any error of the agent's).
    static let version3 = """
        ALTER TABLE beaconflow.agent_state ADD COLUMN online_since timestamptz;
        UPDATE beaconflow.agent_state SET online_since = now() WHERE online;
        INSERT INTO beaconflow.settings (key, value) VALUES ('silent_after_minutes', '5');

        CREATE OR REPLACE VIEW beaconflow.agent_health AS
            SELECT a.site_id, a.agent_id, a.online, a.last_batch_at, a.adverts_per_s, a.spool_bytes, a.clock_offset_ms,
                   CASE WHEN a.online AND greatest(a.last_batch_at, a.online_since) < now() - s.minutes * interval '1 minute'
                        THEN concat_ws('; ', 'silent: online but no adverts since '
                                 || to_char(greatest(a.last_batch_at, a.online_since) AT TIME ZONE 'UTC',
                                            'YYYY-MM-DD"T"HH24:MI:SS"Z"'), a.last_error)
                        ELSE a.last_error END AS last_error
            FROM beaconflow.agent_state a,
                 (SELECT value::integer AS minutes FROM beaconflow.settings WHERE key = 'silent_after_minutes') s;
        """

    /// What each agent has been told is committed (several ingest instances agree through this row), and the
    /// message that goes with a rejection's reason.
    static let version2 = """
        ALTER TABLE beaconflow.agent_state ADD COLUMN committed_through bigint NOT NULL DEFAULT 0;
        ALTER TABLE beaconflow.rejected_batches ADD COLUMN detail text;
        CREATE INDEX ON beaconflow.rejected_batches (received_at);
        """

    static let version1 = #"""
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
        """#
}
