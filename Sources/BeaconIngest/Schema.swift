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
        Migration(version: 9, name: "packed sightings, per-minute rollups and stored hourly occupancy", sql: version9),
        Migration(version: 10, name: "which ingest instance serves each site", sql: version10),
        Migration(version: 11, name: "site leases only the ingest's role can take; content digests; progress and partitions bounded", sql: version11),
        Migration(version: 12, name: "how each beacon was last heard: address, address type, advertising event, URL", sql: version12),
        Migration(version: 13, name: "where each beacon is now; which agents each site waits for", sql: version13),
    ]

    /// Sites are served under leases rather than advisory locks (which any login may take): a claim is a row of
    /// `site_claims` with an epoch and an expiry, renewed by its holder every quarter of the lease, and taken over
    /// by another instance once it has expired or its holder's session is gone. Only these SECURITY DEFINER
    /// functions write the claims and the live instances, and only the writer role may call them. A commit holds
    /// its sites' claims (a row lock, `hold_sites`) until it ends, so a claim never moves under a transaction
    /// that writes for its site; a frozen holder's lock is ended by its session's idle-in-transaction timeout.
    /// Rejected batches are pruned only through `prune_rejections`, never deleted by the writer directly. A batch
    /// records the digest of its content (`DecodedBatch.contentDigest`), so that a batch sent again is told from
    /// another batch under the same sequence by what it says, not only by its metadata.
    static let version11 = #"""
        ALTER TABLE beaconflow.batches ADD COLUMN content_digest bigint;

        CREATE TABLE beaconflow.ingest_instances (
            instance text PRIMARY KEY,
            backend_pid integer NOT NULL,
            joined_at timestamptz NOT NULL,
            expires_at timestamptz NOT NULL
        );
        ALTER TABLE beaconflow.site_claims
            ADD COLUMN epoch bigint NOT NULL DEFAULT 0,
            ADD COLUMN expires_at timestamptz NOT NULL DEFAULT '-infinity';
        REVOKE INSERT, UPDATE, DELETE ON beaconflow.site_claims, beaconflow.ingest_instances FROM beaconflow_writer;
        GRANT SELECT ON beaconflow.site_claims, beaconflow.ingest_instances TO beaconflow_writer;

        -- A lease is held while it has not expired and its holder's session lives (a session that ended, with its
        -- process or its connection, holds nothing; a pid reused meanwhile only makes the lease wait its expiry).
        CREATE FUNCTION beaconflow.lease_held(expires_at timestamptz, backend_pid integer) RETURNS boolean
        LANGUAGE sql STABLE SET search_path = pg_catalog AS $$
            SELECT $1 > now() AND EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a WHERE a.pid = $2)
        $$;

        CREATE FUNCTION beaconflow.check_lease_seconds(seconds double precision) RETURNS interval
        LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog AS $$
        BEGIN
            IF seconds IS NULL OR seconds < 1 OR seconds > 300 THEN
                RAISE EXCEPTION 'a lease lasts 1 to 300 seconds, not %', seconds USING ERRCODE = '22023';
            END IF;
            RETURN seconds * interval '1 second';
        END
        $$;

        -- Counts this session's instance among the live ones for the lease's time (again at each renewal).
        CREATE FUNCTION beaconflow.join_instances(instance text, lease_seconds double precision) RETURNS void
        LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
            INSERT INTO beaconflow.ingest_instances (instance, backend_pid, joined_at, expires_at)
            VALUES ($1, pg_backend_pid(), now(), now() + beaconflow.check_lease_seconds($2))
            ON CONFLICT (instance) DO UPDATE SET backend_pid = excluded.backend_pid, expires_at = excluded.expires_at,
                joined_at = CASE WHEN ingest_instances.backend_pid = excluded.backend_pid
                                 THEN ingest_instances.joined_at ELSE excluded.joined_at END
        $$;

        CREATE FUNCTION beaconflow.leave_instances(instance text) RETURNS void
        LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
            DELETE FROM beaconflow.ingest_instances WHERE instance = $1 AND backend_pid = pg_backend_pid()
        $$;

        -- Claims a site nobody holds: returns the claim's new epoch and the instance that held it before (null when
        -- none did), or no row when it is held, or when its claim is locked by a transaction in progress.
        CREATE FUNCTION beaconflow.claim_site(site text, instance text, lease_seconds double precision)
        RETURNS TABLE (epoch bigint, previous text)
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog SET lock_timeout = '500ms' AS $$
        DECLARE
            held_by text;
            held_until timestamptz;
            held_in integer;
        BEGIN
            SELECT c.instance, c.expires_at, c.backend_pid INTO held_by, held_until, held_in
            FROM beaconflow.site_claims c WHERE c.site_id = claim_site.site FOR UPDATE;
            IF FOUND AND beaconflow.lease_held(held_until, held_in) THEN
                RETURN;
            END IF;
            RETURN QUERY
                INSERT INTO beaconflow.site_claims AS c (site_id, instance, claimed_at, backend_pid, epoch, expires_at)
                VALUES (claim_site.site, claim_site.instance, now(), pg_backend_pid(), 1,
                        now() + beaconflow.check_lease_seconds(lease_seconds))
                ON CONFLICT (site_id) DO UPDATE SET instance = excluded.instance, claimed_at = excluded.claimed_at,
                    backend_pid = excluded.backend_pid, epoch = c.epoch + 1, expires_at = excluded.expires_at
                    -- another session may have claimed it since the look above
                    WHERE NOT beaconflow.lease_held(c.expires_at, c.backend_pid)
                RETURNING c.epoch, held_by;
        EXCEPTION WHEN lock_not_available THEN
            RETURN;
        END
        $$;

        -- Renews this instance's claims (those still of the epochs given) and its place among the live instances;
        -- returns the sites renewed: a site missing from the answer has been taken over.
        CREATE FUNCTION beaconflow.renew_sites(instance text, sites text[], epochs bigint[], lease_seconds double precision)
        RETURNS SETOF text
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
        BEGIN
            PERFORM beaconflow.join_instances(instance, lease_seconds);
            RETURN QUERY
                UPDATE beaconflow.site_claims c
                SET expires_at = now() + beaconflow.check_lease_seconds(lease_seconds), backend_pid = pg_backend_pid()
                FROM unnest(sites, epochs) AS h(site_id, epoch)
                WHERE c.site_id = h.site_id AND c.epoch = h.epoch AND c.instance = renew_sites.instance
                RETURNING c.site_id;
        END
        $$;

        -- In a transaction that writes for these sites: locks their claims (those still of the epochs given) until
        -- it ends, so that no other instance takes them meanwhile; returns the sites held.
        CREATE FUNCTION beaconflow.hold_sites(instance text, sites text[], epochs bigint[]) RETURNS SETOF text
        LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
            SELECT c.site_id FROM beaconflow.site_claims c JOIN unnest($2, $3) AS h(site_id, epoch)
                ON c.site_id = h.site_id AND c.epoch = h.epoch
            WHERE c.instance = $1
            FOR SHARE OF c
        $$;

        -- Hands a site over at once: its lease ends now.
        CREATE FUNCTION beaconflow.release_site(instance text, site text, epoch bigint) RETURNS void
        LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
            UPDATE beaconflow.site_claims SET expires_at = '-infinity'
            WHERE site_id = $2 AND instance = $1 AND site_claims.epoch = $3
        $$;

        CREATE FUNCTION beaconflow.prune_rejections() RETURNS bigint
        LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
            WITH pruned AS (
                DELETE FROM beaconflow.rejected_batches
                WHERE received_at < now() - (SELECT value::integer FROM beaconflow.settings WHERE key = 'retention_days')
                                            * interval '1 day'
                RETURNING 1)
            SELECT count(*) FROM pruned
        $$;
        REVOKE DELETE ON beaconflow.rejected_batches FROM beaconflow_writer;

        DO $$
        DECLARE
            name text;
        BEGIN
            FOREACH name IN ARRAY ARRAY[
                'lease_held(timestamptz, integer)', 'check_lease_seconds(double precision)',
                'join_instances(text, double precision)', 'leave_instances(text)',
                'claim_site(text, text, double precision)', 'renew_sites(text, text[], bigint[], double precision)',
                'hold_sites(text, text[], bigint[])', 'release_site(text, text, bigint)', 'prune_rejections()']
            LOOP
                EXECUTE format('REVOKE ALL ON FUNCTION beaconflow.%s FROM PUBLIC', name);
                EXECUTE format('GRANT EXECUTE ON FUNCTION beaconflow.%s TO beaconflow_writer', name);
            END LOOP;
        END
        $$;

        -- An agent's acknowledged progress only grows, to at most a sequence committed or refused for it: a login
        -- that raised it would have the ingest acknowledge (and the agent delete) batches never stored.
        ALTER TABLE beaconflow.rejected_batches ADD COLUMN site_id text, ADD COLUMN agent_id text, ADD COLUMN sequence bigint;
        CREATE INDEX rejected_batches_agent ON beaconflow.rejected_batches (site_id, agent_id, sequence);
        ALTER TABLE beaconflow.agent_state ADD CONSTRAINT committed_through_in_range
            CHECK (committed_through BETWEEN 0 AND 4611686018427387904) NOT VALID;
        CREATE FUNCTION beaconflow.check_progress() RETURNS trigger
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
        DECLARE
            before bigint := CASE WHEN TG_OP = 'UPDATE' THEN OLD.committed_through ELSE 0 END;
        BEGIN
            IF NEW.committed_through < before THEN
                RAISE EXCEPTION 'committed_through of %/% may not go back from % to %', NEW.site_id, NEW.agent_id,
                    before, NEW.committed_through USING ERRCODE = '23514';
            END IF;
            IF NEW.committed_through > before AND NOT EXISTS (
                SELECT 1 FROM beaconflow.batches b
                WHERE b.site_id = NEW.site_id AND b.agent_id = NEW.agent_id AND b.sequence >= NEW.committed_through
                UNION ALL
                SELECT 1 FROM beaconflow.rejected_batches r
                WHERE r.site_id = NEW.site_id AND r.agent_id = NEW.agent_id AND r.sequence >= NEW.committed_through)
            THEN
                RAISE EXCEPTION 'committed_through % of %/% is beyond every batch committed or refused for it',
                    NEW.committed_through, NEW.site_id, NEW.agent_id USING ERRCODE = '23514';
            END IF;
            RETURN NEW;
        END
        $$;
        CREATE TRIGGER progress_only_as_far_as_stored BEFORE INSERT OR UPDATE OF committed_through ON beaconflow.agent_state
            FOR EACH ROW EXECUTE FUNCTION beaconflow.check_progress();

        -- Partitions within a total (the owner's setting): the writer role cannot make them by the thousand.
        INSERT INTO beaconflow.settings (key, value) VALUES ('partition_days_max', '1000');
        ALTER FUNCTION beaconflow.ensure_partitions(date, integer) RENAME TO make_partitions;
        REVOKE ALL ON FUNCTION beaconflow.make_partitions(date, integer) FROM PUBLIC, beaconflow_writer;
        CREATE FUNCTION beaconflow.ensure_partitions(first_day date, days integer) RETURNS integer
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
        DECLARE
            allowed integer;
            existing integer;
            missing integer := 0;
        BEGIN
            SELECT value::integer INTO allowed FROM beaconflow.settings WHERE key = 'partition_days_max';
            SELECT count(*) INTO existing FROM pg_catalog.pg_inherits WHERE inhparent = 'beaconflow.sighting_packs'::regclass;
            IF days BETWEEN 1 AND 62 AND first_day BETWEEN date '2000-01-01' AND date '2200-01-01' THEN
                SELECT count(*) INTO missing FROM generate_series(0, days - 1) AS d
                WHERE to_regclass(format('beaconflow.sighting_packs_%s', to_char(first_day + d, 'YYYYMMDD'))) IS NULL;
            END IF;
            IF existing + missing > allowed THEN
                RAISE EXCEPTION 'ensure_partitions: % days have partitions, and % more would pass partition_days_max, %',
                    existing, missing, allowed USING ERRCODE = '54000';
            END IF;
            RETURN beaconflow.make_partitions(first_day, days);
        END
        $$;
        REVOKE ALL ON FUNCTION beaconflow.ensure_partitions(date, integer) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION beaconflow.ensure_partitions(date, integer) TO beaconflow_writer;

        CREATE OR REPLACE VIEW beaconflow.site_owners AS
            SELECT c.site_id, c.instance, c.claimed_at AS since, c.expires_at AS lease_expires
            FROM beaconflow.site_claims c
            WHERE c.expires_at > now() AND EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a WHERE a.pid = c.backend_pid);
        """#

    /// Each site's claim by the ingest instance serving it. An instance serves a site while its PostgreSQL session
    /// holds the site's advisory lock (class 'bfst', key `hashtext(site_id)`: `BatchWriter.siteLockClass`), and records
    /// its claim here in that session; `site_owners` shows the claims whose lock is held now, so a claim left by
    /// an instance that died disappears from the view with its session.
    static let version10 = #"""
        CREATE TABLE beaconflow.site_claims (
            site_id text PRIMARY KEY,
            instance text NOT NULL,
            claimed_at timestamptz NOT NULL,
            backend_pid integer NOT NULL
        );
        GRANT SELECT, INSERT, UPDATE ON beaconflow.site_claims TO beaconflow_writer;
        REVOKE DELETE ON beaconflow.site_claims FROM beaconflow_writer;

        CREATE VIEW beaconflow.site_owners AS
            SELECT c.site_id, c.instance, c.claimed_at AS since
            FROM beaconflow.site_claims c
            WHERE EXISTS (
                SELECT 1 FROM pg_catalog.pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted AND l.pid = c.backend_pid AND l.objsubid = 2
                  AND l.classid = 1650881396::oid AND l.objid = hashtext(c.site_id)::oid);

        GRANT SELECT ON beaconflow.site_owners TO beaconflow_reader;
        """#

    /// Sightings are stored packed: one `sighting_packs` row holds what one agent heard of one beacon within one
    /// UTC minute of one batch, its readings in a `bigint[]` (`SightingPack.Reading`: microseconds after the row's
    /// `ts`, the RSSI, the smoothed RSSI in hundredths of a dB). Sites, agents, zones and beacons are integer keys
    /// into append-only dictionaries; the distances are computed by the views from the RSSI, the frame's power and
    /// the agent's placement (its offset and path-loss exponent, part of the source key). Rows stored before this
    /// version stay in `sightings_raw` until their partitions expire; `sightings` shows both, unchanged.
    /// `sighting_minutes` keeps per-minute counts and RSSI per (beacon, agent) for `rollup_retention_days`, and
    /// `zone_occupancy_hour` stores the hourly rollup that the view used to compute on every query.
    static let version9 = #"""
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
        """#

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
