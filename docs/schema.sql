--
-- PostgreSQL database dump
--

--
-- Name: beaconflow; Type: SCHEMA; Schema: -; Owner: postgres
--

CREATE SCHEMA beaconflow;

ALTER SCHEMA beaconflow OWNER TO postgres;

--
-- Name: check_lease_seconds(double precision); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.check_lease_seconds(seconds double precision) RETURNS interval
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
BEGIN
    IF seconds IS NULL OR seconds < 1 OR seconds > 300 THEN
        RAISE EXCEPTION 'a lease lasts 1 to 300 seconds, not %', seconds USING ERRCODE = '22023';
    END IF;
    RETURN seconds * interval '1 second';
END
$$;

ALTER FUNCTION beaconflow.check_lease_seconds(seconds double precision) OWNER TO postgres;

--
-- Name: check_progress(); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.check_progress() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
        SELECT 1 FROM beaconflow.batch_ranges g
        WHERE g.site_id = NEW.site_id AND g.agent_id = NEW.agent_id AND g.last_sequence >= NEW.committed_through
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

ALTER FUNCTION beaconflow.check_progress() OWNER TO postgres;

--
-- Name: claim_site(text, text, double precision); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.claim_site(site text, instance text, lease_seconds double precision) RETURNS TABLE(epoch bigint, previous text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    SET lock_timeout TO '500ms'
    AS $$
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

ALTER FUNCTION beaconflow.claim_site(site text, instance text, lease_seconds double precision) OWNER TO postgres;

--
-- Name: compact_sighting_packs(text, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.compact_sighting_packs(site text, from_ts timestamp with time zone, until_ts timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    SET enable_mergejoin TO 'off'
    SET enable_nestloop TO 'off'
    AS $$
DECLARE
    written integer;
BEGIN
    IF site IS NULL OR from_ts IS NULL OR until_ts IS NULL OR until_ts < from_ts
       OR until_ts - from_ts > interval '2 days' THEN
        RAISE EXCEPTION 'compact_sighting_packs: needs a site and a window of at most two days, not % [%, %)',
            site, from_ts, until_ts USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(1650877296, hashtext(site));  -- 'bfcp'
    WITH minutes AS (
        -- Minutes in several packs, or in one pack of the `bigint[]` form whose readings fall on whole
        -- milliseconds (one that does not stays as it is).
        SELECT source_key, beacon_key, tx_power, date_bin('1 minute', ts, timestamptz '1970-01-01 00:00:00+00') AS minute
        FROM beaconflow.sighting_packs
        WHERE ts >= from_ts AND ts < until_ts
          AND source_key IN (SELECT source_key FROM beaconflow.sighting_sources WHERE site_id = site)
        GROUP BY 1, 2, 3, 4
        HAVING count(*) > 1
            OR bool_and(readings IS NOT NULL
                        AND NOT EXISTS (SELECT FROM unnest(readings) AS x(reading) WHERE (x.reading >> 24) % 1000 <> 0
                                                                         OR (x.reading >> 24) >= 65536000))
    ), removed AS (
        DELETE FROM beaconflow.sighting_packs p
        USING minutes m
        WHERE p.ts >= from_ts AND p.ts < until_ts
          AND p.source_key = m.source_key AND p.beacon_key = m.beacon_key
          AND coalesce(p.tx_power, 32767) = coalesce(m.tx_power, 32767)  -- an equality, so that it can hash
          AND date_bin('1 minute', p.ts, timestamptz '1970-01-01 00:00:00+00') = m.minute
        RETURNING p.ts, p.source_key, p.beacon_key, p.tx_power, p.readings, p.reading_ms, p.reading_rssi,
                  p.reading_smoothed, p.reading_smoothed_half,
                  date_bin('1 minute', p.ts, timestamptz '1970-01-01 00:00:00+00') AS minute
    ), readings AS (
        -- Each reading's offset made relative to the merged pack's time, its minute's first.
        SELECT d.first_ts, d.source_key, d.beacon_key, d.tx_power,
               (extract(epoch FROM d.ts - d.first_ts) * 1000000)::bigint + r.offset_us AS offset_us,
               r.rssi, r.smoothed_centi_db
        FROM (SELECT removed.*, min(ts) OVER (PARTITION BY source_key, beacon_key, tx_power, minute) AS first_ts
              FROM removed) d
        CROSS JOIN LATERAL beaconflow.pack_readings(d.readings, d.reading_ms, d.reading_rssi, d.reading_smoothed,
                                                    d.reading_smoothed_half) r
    ), packs AS (
        -- Every form, in the old form's order; the insert keeps the ones that fit.
        SELECT first_ts, source_key, beacon_key, tx_power,
               bool_and(offset_us % 1000 = 0 AND offset_us < 65536000) AS whole_ms,
               bool_and(smoothed_centi_db % 50 = 0 AND smoothed_centi_db BETWEEN -12750 AND 0) AS half_db,
               array_agg((offset_us << 24) | ((rssi + 128)::bigint << 16) | (smoothed_centi_db + 32768)::bigint
                         ORDER BY offset_us, rssi, smoothed_centi_db) AS readings,
               array_agg((least(offset_us / 1000, 65535) - 32768)::smallint
                         ORDER BY offset_us, rssi, smoothed_centi_db) AS reading_ms,
               array_agg(rssi::integer::"char" ORDER BY offset_us, rssi, smoothed_centi_db) AS reading_rssi,
               array_agg(smoothed_centi_db::smallint ORDER BY offset_us, rssi, smoothed_centi_db) AS reading_smoothed,
               array_agg(CASE WHEN smoothed_centi_db % 50 = 0 AND smoothed_centi_db BETWEEN -12750 AND 0
                              THEN (smoothed_centi_db / 50 + 127)::"char" END
                         ORDER BY offset_us, rssi, smoothed_centi_db) AS reading_smoothed_half
        FROM readings
        GROUP BY first_ts, source_key, beacon_key, tx_power
    ), inserted AS (
        INSERT INTO beaconflow.sighting_packs (ts, source_key, beacon_key, tx_power, readings, reading_ms, reading_rssi,
                                               reading_smoothed, reading_smoothed_half)
        SELECT first_ts, source_key, beacon_key, tx_power,
               CASE WHEN NOT whole_ms THEN readings END, CASE WHEN whole_ms THEN reading_ms END,
               CASE WHEN whole_ms THEN reading_rssi END, CASE WHEN whole_ms AND NOT half_db THEN reading_smoothed END,
               CASE WHEN whole_ms AND half_db THEN reading_smoothed_half END
        FROM packs
        RETURNING 1
    )
    SELECT count(*) INTO written FROM inserted;
    RETURN written;
END
$$;

ALTER FUNCTION beaconflow.compact_sighting_packs(site text, from_ts timestamp with time zone, until_ts timestamp with time zone) OWNER TO postgres;

--
-- Name: drop_partitions_before(date); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.drop_partitions_before(cutoff date) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    SET lock_timeout TO '1s'
    AS $_$
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
$_$;

ALTER FUNCTION beaconflow.drop_partitions_before(cutoff date) OWNER TO postgres;

--
-- Name: ensure_partitions(date, integer); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.ensure_partitions(first_day date, days integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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

ALTER FUNCTION beaconflow.ensure_partitions(first_day date, days integer) OWNER TO postgres;

--
-- Name: fold_batches(text, timestamp with time zone); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.fold_batches(site text, until_ts timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
DECLARE
    folded integer;
BEGIN
    IF site IS NULL OR until_ts IS NULL THEN
        RAISE EXCEPTION 'fold_batches: needs a site and a time, not % and %', site, until_ts USING ERRCODE = '22023';
    END IF;
    -- The instance writing the site holds its claim FOR SHARE for the whole of its transaction: a batch is
    -- checked against the ranges and inserted either before this fold or after it, never between.
    PERFORM 1 FROM beaconflow.site_claims c WHERE c.site_id = site FOR UPDATE;
    PERFORM pg_advisory_xact_lock(1650877298, hashtext(site));  -- 'bfcr'
    WITH gone AS (
        DELETE FROM beaconflow.batches b
        USING beaconflow.agent_state a
        WHERE b.site_id = site AND a.site_id = b.site_id AND a.agent_id = b.agent_id
          AND b.sequence <= a.committed_through AND b.committed_at < until_ts
        RETURNING b.agent_id, b.boot_id, b.sequence, b.sightings, b.committed_at
    ), runs AS (
        SELECT agent_id, boot_id, min(sequence) AS first_sequence, max(sequence) AS last_sequence,
               sum(sightings) AS sightings, min(committed_at) AS first_committed_at,
               max(committed_at) AS last_committed_at, count(*) AS batches
        FROM (SELECT *, sequence - row_number() OVER (PARTITION BY agent_id, boot_id ORDER BY sequence) AS run
              FROM gone) g
        GROUP BY agent_id, boot_id, run
    ), extended AS (
        -- A run right after a range of the same boot id lengthens it.
        UPDATE beaconflow.batch_ranges r
        SET last_sequence = u.last_sequence, sightings = r.sightings + u.sightings,
            last_committed_at = greatest(r.last_committed_at, u.last_committed_at)
        FROM runs u
        WHERE r.site_id = site AND r.agent_id = u.agent_id AND r.boot_id = u.boot_id
          AND r.last_sequence = u.first_sequence - 1
        RETURNING u.agent_id, u.first_sequence
    ), inserted AS (
        INSERT INTO beaconflow.batch_ranges (site_id, agent_id, boot_id, first_sequence, last_sequence, sightings,
                                             first_committed_at, last_committed_at)
        SELECT site, u.agent_id, u.boot_id, u.first_sequence, u.last_sequence, u.sightings, u.first_committed_at,
               u.last_committed_at
        FROM runs u
        WHERE NOT EXISTS (SELECT 1 FROM extended e WHERE e.agent_id = u.agent_id AND e.first_sequence = u.first_sequence)
    )
    SELECT coalesce(sum(batches), 0) INTO folded FROM runs;
    RETURN folded;
END
$$;

ALTER FUNCTION beaconflow.fold_batches(site text, until_ts timestamp with time zone) OWNER TO postgres;

--
-- Name: hold_sites(text, text[], bigint[]); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.hold_sites(instance text, sites text[], epochs bigint[]) RETURNS SETOF text
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $_$
    SELECT c.site_id FROM beaconflow.site_claims c JOIN unnest($2, $3) AS h(site_id, epoch)
        ON c.site_id = h.site_id AND c.epoch = h.epoch
    WHERE c.instance = $1
    FOR KEY SHARE OF c
$_$;

ALTER FUNCTION beaconflow.hold_sites(instance text, sites text[], epochs bigint[]) OWNER TO postgres;

--
-- Name: join_instances(text, double precision); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.join_instances(instance text, lease_seconds double precision) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $_$
    INSERT INTO beaconflow.ingest_instances (instance, backend_pid, joined_at, expires_at)
    VALUES ($1, pg_backend_pid(), now(), now() + beaconflow.check_lease_seconds($2))
    ON CONFLICT (instance) DO UPDATE SET backend_pid = excluded.backend_pid, expires_at = excluded.expires_at,
        joined_at = CASE WHEN ingest_instances.backend_pid = excluded.backend_pid
                         THEN ingest_instances.joined_at ELSE excluded.joined_at END
$_$;

ALTER FUNCTION beaconflow.join_instances(instance text, lease_seconds double precision) OWNER TO postgres;

--
-- Name: lease_held(timestamp with time zone, integer); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.lease_held(expires_at timestamp with time zone, backend_pid integer) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $_$
    SELECT $1 > now() AND EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a WHERE a.pid = $2)
$_$;

ALTER FUNCTION beaconflow.lease_held(expires_at timestamp with time zone, backend_pid integer) OWNER TO postgres;

--
-- Name: leave_instances(text); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.leave_instances(instance text) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $_$
    DELETE FROM beaconflow.ingest_instances WHERE instance = $1 AND backend_pid = pg_backend_pid()
$_$;

ALTER FUNCTION beaconflow.leave_instances(instance text) OWNER TO postgres;

--
-- Name: make_partitions(date, integer); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.make_partitions(first_day date, days integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    SET lock_timeout TO '1s'
    AS $$
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

ALTER FUNCTION beaconflow.make_partitions(first_day date, days integer) OWNER TO postgres;

--
-- Name: merge_address_beacon(text, text, text); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.merge_address_beacon(site text, address_beacon text, beacon text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
DECLARE
    from_key integer;
    to_key integer;
    moved bigint := 0;
    n bigint;
BEGIN
    IF site IS NULL OR address_beacon IS NULL OR beacon IS NULL OR address_beacon NOT LIKE 'mac:%'
       OR beacon LIKE 'mac:%' THEN
        RAISE EXCEPTION 'merge_address_beacon: needs a site, an address beacon (mac:) and another beacon, not %, %, %',
            site, address_beacon, beacon USING ERRCODE = '22023';
    END IF;
    SELECT beacon_key INTO from_key FROM beaconflow.beacon_keys WHERE beacon_id = address_beacon;
    IF from_key IS NOT NULL THEN
        INSERT INTO beaconflow.beacon_keys (beacon_id) VALUES (beacon) ON CONFLICT (beacon_id) DO NOTHING;
        SELECT beacon_key INTO to_key FROM beaconflow.beacon_keys WHERE beacon_id = beacon;

        UPDATE beaconflow.sighting_packs SET beacon_key = to_key
        WHERE beacon_key = from_key
          AND source_key IN (SELECT source_key FROM beaconflow.sighting_sources WHERE site_id = site);
        GET DIAGNOSTICS n = ROW_COUNT;
        moved := moved + n;

        WITH taken AS (
            DELETE FROM beaconflow.sighting_minutes
            WHERE beacon_key = from_key
              AND source_key IN (SELECT source_key FROM beaconflow.sighting_sources WHERE site_id = site)
            RETURNING minute, source_key, sightings, rssi_min, rssi_max, rssi_sum
        )
        INSERT INTO beaconflow.sighting_minutes AS m (minute, source_key, beacon_key, sightings, rssi_min, rssi_max, rssi_sum)
        SELECT minute, source_key, to_key, sightings, rssi_min, rssi_max, rssi_sum FROM taken
        ON CONFLICT (beacon_key, minute, source_key) DO UPDATE
            SET sightings = m.sightings + excluded.sightings, rssi_min = least(m.rssi_min, excluded.rssi_min),
                rssi_max = greatest(m.rssi_max, excluded.rssi_max), rssi_sum = m.rssi_sum + excluded.rssi_sum;

        -- A transmission stored under both (two agents, one before the identity and one after) is kept once.
        DELETE FROM beaconflow.telemetry_raw t
        WHERE t.beacon_key = from_key AND t.site_id = site
          AND EXISTS (SELECT FROM beaconflow.telemetry_raw b
                      WHERE b.beacon_key = to_key AND b.adv_count IS NOT DISTINCT FROM t.adv_count
                        AND b.uptime_s IS NOT DISTINCT FROM t.uptime_s);
        UPDATE beaconflow.telemetry_raw SET beacon_key = to_key WHERE beacon_key = from_key AND site_id = site;
        GET DIAGNOSTICS n = ROW_COUNT;
        moved := moved + n;
    END IF;

    UPDATE beaconflow.sensor_readings_raw SET beacon_id = beacon WHERE beacon_id = address_beacon AND site_id = site;
    GET DIAGNOSTICS n = ROW_COUNT;
    moved := moved + n;

    DELETE FROM beaconflow.visits_raw v
    WHERE v.site_id = site AND v.beacon_id = address_beacon
      AND EXISTS (SELECT FROM beaconflow.visits_raw b WHERE b.site_id = site AND b.beacon_id = beacon AND b.enter_ts = v.enter_ts);
    UPDATE beaconflow.visits_raw SET beacon_id = beacon WHERE site_id = site AND beacon_id = address_beacon;
    GET DIAGNOSTICS n = ROW_COUNT;
    moved := moved + n;

    -- The live zone and position are the address beacon's: the newer.
    IF EXISTS (SELECT FROM beaconflow.beacon_live_zone WHERE site_id = site AND beacon_id = address_beacon) THEN
        DELETE FROM beaconflow.beacon_live_zone WHERE site_id = site AND beacon_id = beacon;
        UPDATE beaconflow.beacon_live_zone SET beacon_id = beacon WHERE site_id = site AND beacon_id = address_beacon;
    END IF;
    IF EXISTS (SELECT FROM beaconflow.beacon_live_position WHERE site_id = site AND beacon_id = address_beacon) THEN
        DELETE FROM beaconflow.beacon_live_position WHERE site_id = site AND beacon_id = beacon;
        UPDATE beaconflow.beacon_live_position SET beacon_id = beacon WHERE site_id = site AND beacon_id = address_beacon;
    END IF;
    DELETE FROM beaconflow.beacon_position_minutes p
    WHERE p.site_id = site AND p.beacon_id = address_beacon
      AND EXISTS (SELECT FROM beaconflow.beacon_position_minutes b
                  WHERE b.site_id = site AND b.beacon_id = beacon AND b.minute = p.minute);
    UPDATE beaconflow.beacon_position_minutes SET beacon_id = beacon WHERE site_id = site AND beacon_id = address_beacon;

    -- What the address beacon's transmissions told of the battery stays, where the beacon's own row lacks it (an
    -- ingest that restarted in between knows the address beacon from here only); then its row goes.
    UPDATE beaconflow.beacon_state b
    SET battery_mv = coalesce(b.battery_mv, a.battery_mv),
        battery_trend_mv_per_day = coalesce(b.battery_trend_mv_per_day, a.battery_trend_mv_per_day),
        est_days_left = coalesce(b.est_days_left, a.est_days_left),
        temperature_c = coalesce(b.temperature_c, a.temperature_c),
        battery_pct = coalesce(b.battery_pct, a.battery_pct),
        battery_trend_pct_per_day = coalesce(b.battery_trend_pct_per_day, a.battery_trend_pct_per_day),
        days_left_low = coalesce(b.days_left_low, a.days_left_low),
        days_left_high = coalesce(b.days_left_high, a.days_left_high),
        replace_by = coalesce(b.replace_by, a.replace_by),
        charge_left_pct = coalesce(b.charge_left_pct, a.charge_left_pct),
        coldest_carried_c = coalesce(b.coldest_carried_c, a.coldest_carried_c),
        cell_since = coalesce(b.cell_since, a.cell_since),
        forecast = coalesce(b.forecast, a.forecast),
        url = coalesce(b.url, a.url),
        first_seen = least(b.first_seen, a.first_seen)
    FROM beaconflow.beacon_state a
    WHERE b.beacon_id = beacon AND a.beacon_id = address_beacon AND a.site_id = site;
    DELETE FROM beaconflow.beacon_state WHERE beacon_id = address_beacon AND site_id = site;
    RETURN moved;
END
$$;

ALTER FUNCTION beaconflow.merge_address_beacon(site text, address_beacon text, beacon text) OWNER TO postgres;

--
-- Name: pack_readings(bigint[], smallint[], "char"[], smallint[], "char"[]); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.pack_readings(readings bigint[], reading_ms smallint[], reading_rssi "char"[], reading_smoothed smallint[], reading_smoothed_half "char"[]) RETURNS TABLE(offset_us bigint, rssi smallint, smoothed_centi_db integer)
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT x.reading >> 24, (((x.reading >> 16) & 255) - 128)::smallint, ((x.reading & 65535) - 32768)::integer
    FROM (SELECT unnest(readings) AS reading) x
    UNION ALL
    SELECT (x.ms + 32768)::bigint * 1000, x.rssi::integer::smallint,
           coalesce(x.smoothed::integer, (x.half::integer - 127) * 50)
    FROM (SELECT unnest(reading_ms) AS ms, unnest(reading_rssi) AS rssi, unnest(reading_smoothed) AS smoothed,
                 unnest(reading_smoothed_half) AS half) x
$$;

ALTER FUNCTION beaconflow.pack_readings(readings bigint[], reading_ms smallint[], reading_rssi "char"[], reading_smoothed smallint[], reading_smoothed_half "char"[]) OWNER TO postgres;

--
-- Name: prune_positions(); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.prune_positions() RETURNS bigint
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    WITH pruned AS (
        DELETE FROM beaconflow.beacon_position_minutes
        WHERE minute < now() - (SELECT value::integer FROM beaconflow.settings WHERE key = 'retention_days')
                               * interval '1 day'
        RETURNING 1)
    SELECT count(*) FROM pruned
$$;

ALTER FUNCTION beaconflow.prune_positions() OWNER TO postgres;

--
-- Name: prune_rejections(); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.prune_rejections() RETURNS bigint
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    WITH pruned AS (
        DELETE FROM beaconflow.rejected_batches
        WHERE received_at < now() - (SELECT value::integer FROM beaconflow.settings WHERE key = 'retention_days')
                                    * interval '1 day'
        RETURNING 1)
    SELECT count(*) FROM pruned
$$;

ALTER FUNCTION beaconflow.prune_rejections() OWNER TO postgres;

--
-- Name: refresh_zone_hours(text[], text[], timestamp with time zone[]); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.refresh_zone_hours(sites text[], zones text[], hours timestamp with time zone[]) RETURNS integer
    LANGUAGE sql
    AS $$
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

ALTER FUNCTION beaconflow.refresh_zone_hours(sites text[], zones text[], hours timestamp with time zone[]) OWNER TO postgres;

--
-- Name: release_site(text, text, bigint); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.release_site(instance text, site text, epoch bigint) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $_$
    UPDATE beaconflow.site_claims SET expires_at = '-infinity'
    WHERE site_id = $2 AND instance = $1 AND site_claims.epoch = $3
$_$;

ALTER FUNCTION beaconflow.release_site(instance text, site text, epoch bigint) OWNER TO postgres;

--
-- Name: renew_sites(text, text[], bigint[], double precision); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.renew_sites(instance text, sites text[], epochs bigint[], lease_seconds double precision) RETURNS SETOF text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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

ALTER FUNCTION beaconflow.renew_sites(instance text, sites text[], epochs bigint[], lease_seconds double precision) OWNER TO postgres;

--
-- Name: set_instance_status(text, jsonb); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.set_instance_status(instance text, status jsonb) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $_$
    UPDATE beaconflow.ingest_instances SET status = $2, status_at = now() WHERE instance = $1 AND backend_pid = pg_backend_pid()
$_$;

ALTER FUNCTION beaconflow.set_instance_status(instance text, status jsonb) OWNER TO postgres;

--
-- Name: set_sites_digest(text, text); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.set_sites_digest(instance text, digest text) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $_$
    UPDATE beaconflow.ingest_instances SET sites_digest = $2 WHERE instance = $1 AND backend_pid = pg_backend_pid()
$_$;

ALTER FUNCTION beaconflow.set_sites_digest(instance text, digest text) OWNER TO postgres;

--
-- Name: sightings_between(timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: beaconflow; Owner: postgres
--

CREATE FUNCTION beaconflow.sightings_between(from_ts timestamp with time zone, until_ts timestamp with time zone) RETURNS TABLE(ts timestamp with time zone, site_id text, agent_id text, agent_zone_id text, beacon_id text, rssi smallint, tx_power smallint, distance_m real, smoothed_distance_m real)
    LANGUAGE sql STABLE
    AS $$
    SELECT r.ts, r.site_id, r.agent_id, r.agent_zone_id, r.beacon_id, r.rssi, r.tx_power, r.distance_m,
           r.smoothed_distance_m
    FROM beaconflow.sighting_readings r
    WHERE r.stored_ts > from_ts - interval '1 minute' AND r.stored_ts < until_ts AND r.ts >= from_ts AND r.ts < until_ts
$$;

ALTER FUNCTION beaconflow.sightings_between(from_ts timestamp with time zone, until_ts timestamp with time zone) OWNER TO postgres;

--
-- Name: agent_state; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.agent_state (
    site_id text NOT NULL,
    agent_id text NOT NULL,
    online boolean DEFAULT false NOT NULL,
    last_batch_at timestamp with time zone,
    adverts_per_s real,
    spool_bytes bigint,
    clock_offset_ms real,
    last_error text,
    committed_through bigint DEFAULT 0 NOT NULL,
    online_since timestamp with time zone
);

ALTER TABLE beaconflow.agent_state OWNER TO postgres;

--
-- Name: agent_zone_state; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.agent_zone_state (
    site_id text NOT NULL,
    agent_id text NOT NULL,
    zone_state text NOT NULL,
    since timestamp with time zone NOT NULL,
    CONSTRAINT agent_zone_state_zone_state_check CHECK ((zone_state = ANY (ARRAY['awaited'::text, 'live'::text, 'holding'::text, 'let_go'::text])))
);

ALTER TABLE beaconflow.agent_zone_state OWNER TO postgres;

--
-- Name: settings; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.settings (
    key text NOT NULL,
    value text NOT NULL
);

ALTER TABLE beaconflow.settings OWNER TO postgres;

--
-- Name: agent_health; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.agent_health AS
 SELECT COALESCE(a.site_id, z.site_id) AS site_id,
    COALESCE(a.agent_id, z.agent_id) AS agent_id,
    COALESCE(a.online, false) AS online,
    a.last_batch_at,
    a.adverts_per_s,
    a.spool_bytes,
    a.clock_offset_ms,
        CASE
            WHEN (a.online AND (GREATEST(a.last_batch_at, a.online_since) < (now() - ((s.minutes)::double precision * '00:01:00'::interval)))) THEN concat_ws('; '::text, ('silent: online but no adverts since '::text || to_char((GREATEST(a.last_batch_at, a.online_since) AT TIME ZONE 'UTC'::text), 'YYYY-MM-DD"T"HH24:MI:SS"Z"'::text)), a.last_error)
            ELSE a.last_error
        END AS last_error,
    z.zone_state,
    z.since AS zone_state_since
   FROM ((beaconflow.agent_state a
     FULL JOIN beaconflow.agent_zone_state z ON (((z.site_id = a.site_id) AND (z.agent_id = a.agent_id))))
     CROSS JOIN ( SELECT (settings.value)::integer AS minutes
           FROM beaconflow.settings
          WHERE (settings.key = 'silent_after_minutes'::text)) s);

ALTER TABLE beaconflow.agent_health OWNER TO postgres;

--
-- Name: batch_ranges; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.batch_ranges (
    site_id text NOT NULL,
    agent_id text NOT NULL,
    boot_id bigint NOT NULL,
    first_sequence bigint NOT NULL,
    last_sequence bigint NOT NULL,
    sightings bigint NOT NULL,
    first_committed_at timestamp with time zone NOT NULL,
    last_committed_at timestamp with time zone NOT NULL,
    CONSTRAINT batch_ranges_check CHECK ((first_sequence <= last_sequence))
);

ALTER TABLE beaconflow.batch_ranges OWNER TO postgres;

--
-- Name: batches; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.batches (
    site_id text NOT NULL,
    agent_id text NOT NULL,
    sequence bigint NOT NULL,
    boot_id bigint NOT NULL,
    agent_clock timestamp with time zone,
    sightings integer NOT NULL,
    committed_at timestamp with time zone DEFAULT now() NOT NULL,
    content_digest bigint
);

ALTER TABLE beaconflow.batches OWNER TO postgres;

--
-- Name: beacon_state; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.beacon_state (
    beacon_id text NOT NULL,
    site_id text,
    last_seen timestamp with time zone,
    battery_mv integer,
    battery_trend_mv_per_day real,
    est_days_left real,
    temperature_c real,
    reboots_7d integer DEFAULT 0 NOT NULL,
    status text DEFAULT 'ok'::text NOT NULL,
    kind text,
    first_seen timestamp with time zone,
    battery_pct real,
    battery_trend_pct_per_day real,
    address macaddr,
    address_random boolean,
    advertising_event smallint,
    url text,
    cloned_since timestamp with time zone,
    days_left_low real,
    days_left_high real,
    replace_by timestamp with time zone,
    charge_left_pct real,
    cell_since timestamp with time zone,
    forecast text,
    coldest_carried_c real,
    CONSTRAINT beacon_state_forecast_check CHECK ((forecast = ANY (ARRAY['charge_counting'::text, 'voltage_trend'::text, 'percent_trend'::text]))),
    CONSTRAINT beacon_state_status_check CHECK ((status = ANY (ARRAY['ok'::text, 'low_battery'::text, 'stale'::text, 'rebooting'::text, 'cloned'::text])))
);

ALTER TABLE beaconflow.beacon_state OWNER TO postgres;

--
-- Name: beacon_health; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.beacon_health AS
 SELECT beacon_state.beacon_id,
    beacon_state.site_id,
    beacon_state.last_seen,
    beacon_state.battery_mv,
    beacon_state.battery_trend_mv_per_day,
    beacon_state.est_days_left,
    beacon_state.temperature_c,
    beacon_state.reboots_7d,
        CASE
            WHEN (beacon_state.last_seen < (now() - ((( SELECT (settings.value)::integer AS value
               FROM beaconflow.settings
              WHERE (settings.key = 'stale_after_minutes'::text)))::double precision * '00:01:00'::interval))) THEN 'stale'::text
            ELSE beacon_state.status
        END AS status,
    beacon_state.battery_pct,
    beacon_state.battery_trend_pct_per_day,
    beacon_state.cloned_since,
    beacon_state.days_left_low,
    beacon_state.days_left_high,
    beacon_state.replace_by,
    beacon_state.charge_left_pct,
    beacon_state.cell_since,
    beacon_state.forecast,
    beacon_state.coldest_carried_c
   FROM beaconflow.beacon_state;

ALTER TABLE beaconflow.beacon_health OWNER TO postgres;

--
-- Name: beacon_live_zone; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.beacon_live_zone (
    site_id text NOT NULL,
    beacon_id text NOT NULL,
    zone_id text NOT NULL,
    enter_ts timestamp with time zone NOT NULL,
    exit_ts timestamp with time zone
);

ALTER TABLE beaconflow.beacon_live_zone OWNER TO postgres;

--
-- Name: beacon_registry; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.beacon_registry (
    beacon_id text NOT NULL,
    label text,
    identity_key boolean DEFAULT false NOT NULL,
    bthome_bindkey boolean DEFAULT false NOT NULL,
    outdoors boolean DEFAULT false NOT NULL
);

ALTER TABLE beaconflow.beacon_registry OWNER TO postgres;

--
-- Name: site_registry; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.site_registry (
    site_id text NOT NULL,
    timezone text NOT NULL,
    absence_timeout_s double precision NOT NULL,
    allowed_lateness_s double precision NOT NULL
);

ALTER TABLE beaconflow.site_registry OWNER TO postgres;

--
-- Name: visits_raw; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.visits_raw (
    site_id text NOT NULL,
    zone_id text NOT NULL,
    beacon_id text NOT NULL,
    enter_ts timestamp with time zone NOT NULL,
    exit_ts timestamp with time zone
);

ALTER TABLE beaconflow.visits_raw OWNER TO postgres;

--
-- Name: beacon_locations; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.beacon_locations AS
 SELECT COALESCE(s.beacon_id, r.beacon_id) AS beacon_id,
    s.site_id,
    r.label,
    v.zone_id,
    COALESCE(((v.zone_id IS NOT NULL) AND (v.exit_ts IS NULL) AND (s.last_seen > (now() - (COALESCE(c.absence_timeout_s, (30)::double precision) * '00:00:01'::interval)))), false) AS present,
        CASE
            WHEN (v.zone_id IS NULL) THEN NULL::timestamp with time zone
            WHEN (v.exit_ts IS NOT NULL) THEN v.exit_ts
            WHEN (s.last_seen > (now() - (COALESCE(c.absence_timeout_s, (30)::double precision) * '00:00:01'::interval))) THEN v.enter_ts
            ELSE s.last_seen
        END AS since,
    s.last_seen AS last_heard
   FROM (((beaconflow.beacon_state s
     FULL JOIN beaconflow.beacon_registry r ON ((r.beacon_id = s.beacon_id)))
     LEFT JOIN beaconflow.site_registry c ON ((c.site_id = s.site_id)))
     LEFT JOIN LATERAL ( SELECT l.zone_id,
            l.enter_ts,
            l.exit_ts
           FROM beaconflow.beacon_live_zone l
          WHERE ((l.site_id = s.site_id) AND (l.beacon_id = s.beacon_id))
        UNION ALL
         SELECT w.zone_id,
            w.enter_ts,
            w.exit_ts
           FROM ( SELECT v_1.zone_id,
                    v_1.enter_ts,
                    v_1.exit_ts
                   FROM beaconflow.visits_raw v_1
                  WHERE ((v_1.site_id = s.site_id) AND (v_1.beacon_id = s.beacon_id) AND (NOT (EXISTS ( SELECT
                           FROM beaconflow.beacon_live_zone l
                          WHERE ((l.site_id = s.site_id) AND (l.beacon_id = s.beacon_id))))))
                  ORDER BY v_1.enter_ts DESC
                 LIMIT 1) w) v ON (true));

ALTER TABLE beaconflow.beacon_locations OWNER TO postgres;

--
-- Name: night_forecasts; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.night_forecasts (
    site_id text NOT NULL,
    night date NOT NULL,
    low_c real NOT NULL,
    CONSTRAINT night_forecasts_low_c_check CHECK (((low_c >= ('-90'::integer)::double precision) AND (low_c <= (60)::double precision)))
);

ALTER TABLE beaconflow.night_forecasts OWNER TO postgres;

--
-- Name: battery_replacements; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.battery_replacements AS
 SELECT h.site_id,
    h.beacon_id,
    l.label,
    LEAST(h.replace_by, ((c.night)::timestamp without time zone AT TIME ZONE COALESCE(s.timezone, 'UTC'::text))) AS replace_by,
    h.est_days_left,
    h.days_left_low,
    h.days_left_high,
    h.forecast,
    h.battery_mv,
    h.battery_pct,
    h.status,
    l.zone_id AS last_zone_id,
    h.last_seen,
    h.coldest_carried_c,
    c.night AS cold_night,
    c.low_c AS cold_night_low_c
   FROM ((((beaconflow.beacon_health h
     LEFT JOIN beaconflow.beacon_locations l USING (beacon_id))
     LEFT JOIN beaconflow.beacon_registry r ON ((r.beacon_id = h.beacon_id)))
     LEFT JOIN beaconflow.site_registry s ON ((s.site_id = h.site_id)))
     LEFT JOIN LATERAL ( SELECT f.night,
            f.low_c
           FROM beaconflow.night_forecasts f
          WHERE (r.outdoors AND (f.site_id = h.site_id) AND (f.low_c <= h.coldest_carried_c) AND (f.night > (((now() AT TIME ZONE COALESCE(s.timezone, 'UTC'::text)) - '12:00:00'::interval))::date))
          ORDER BY f.night
         LIMIT 1) c ON (true))
  WHERE (h.replace_by IS NOT NULL);

ALTER TABLE beaconflow.battery_replacements OWNER TO postgres;

--
-- Name: beacon_keys; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.beacon_keys (
    beacon_key integer NOT NULL,
    beacon_id text NOT NULL
);

ALTER TABLE beaconflow.beacon_keys OWNER TO postgres;

--
-- Name: beacon_keys_beacon_key_seq; Type: SEQUENCE; Schema: beaconflow; Owner: postgres
--

ALTER TABLE beaconflow.beacon_keys ALTER COLUMN beacon_key ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME beaconflow.beacon_keys_beacon_key_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: beacon_live_position; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.beacon_live_position (
    site_id text NOT NULL,
    beacon_id text NOT NULL,
    ts timestamp with time zone NOT NULL,
    x real NOT NULL,
    y real NOT NULL,
    error_m real NOT NULL,
    zone_probabilities jsonb NOT NULL
);

ALTER TABLE beaconflow.beacon_live_position OWNER TO postgres;

--
-- Name: beacon_position_minutes; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.beacon_position_minutes (
    site_id text NOT NULL,
    beacon_id text NOT NULL,
    minute timestamp with time zone NOT NULL,
    positions smallint[] NOT NULL
);

ALTER TABLE beaconflow.beacon_position_minutes OWNER TO postgres;

--
-- Name: beacon_position_history; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.beacon_position_history AS
 SELECT (m.minute + ((((m.positions[i.i])::numeric / 10.0))::double precision * '00:00:01'::interval)) AS ts,
    m.site_id,
    m.beacon_id,
    (((m.positions[(i.i + 1)])::numeric / 10.0))::real AS x,
    (((m.positions[(i.i + 2)])::numeric / 10.0))::real AS y,
    (((m.positions[(i.i + 3)])::numeric / 10.0))::real AS error_m
   FROM beaconflow.beacon_position_minutes m,
    LATERAL generate_series(1, COALESCE(array_length(m.positions, 1), 0), 4) i(i);

ALTER TABLE beaconflow.beacon_position_history OWNER TO postgres;

--
-- Name: beacon_positions; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.beacon_positions AS
 SELECT p.site_id,
    p.beacon_id,
    p.ts,
    p.x,
    p.y,
    p.error_m,
    p.zone_probabilities
   FROM beaconflow.beacon_live_position p;

ALTER TABLE beaconflow.beacon_positions OWNER TO postgres;

--
-- Name: beacons; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.beacons AS
 SELECT COALESCE(s.beacon_id, r.beacon_id) AS beacon_id,
    s.site_id,
    r.label,
        CASE
            WHEN (r.identity_key AND (COALESCE(s.beacon_id, r.beacon_id) !~~ 'mac:%'::text) AND (COALESCE(s.beacon_id, r.beacon_id) !~~ 'anon:%'::text) AND (COALESCE(s.beacon_id, r.beacon_id) !~~ 'eid:%'::text)) THEN 'eddystone-eid'::text
            ELSE COALESCE(s.kind,
            CASE
                WHEN r.bthome_bindkey THEN 'bthome'::text
                ELSE NULL::text
            END)
        END AS kind,
    s.first_seen,
    s.last_seen,
        CASE
            WHEN (COALESCE(s.beacon_id, r.beacon_id) ~~ 'mac:%'::text) THEN 'address'::text
            WHEN (COALESCE(s.beacon_id, r.beacon_id) ~~ 'anon:%'::text) THEN 'pseudonym'::text
            WHEN (COALESCE(s.beacon_id, r.beacon_id) ~~ 'eid:%'::text) THEN 'unresolved_eid'::text
            WHEN r.identity_key THEN 'resolved_eid'::text
            ELSE 'frame'::text
        END AS identity_source,
    s.address,
        CASE s.address_random
            WHEN true THEN 'random'::text
            WHEN false THEN 'public'::text
            ELSE NULL::text
        END AS address_type,
        CASE
            WHEN (s.advertising_event IS NULL) THEN NULL::text
            WHEN (s.advertising_event = 19) THEN 'adv_ind'::text
            WHEN (s.advertising_event = 21) THEN 'adv_direct_ind'::text
            WHEN (s.advertising_event = 18) THEN 'adv_scan_ind'::text
            WHEN (s.advertising_event = 16) THEN 'adv_nonconn_ind'::text
            WHEN (s.advertising_event = ANY (ARRAY[26, 27])) THEN 'scan_rsp'::text
            ELSE (((('ext'::text ||
            CASE
                WHEN (((s.advertising_event)::integer & 1) <> 0) THEN '_connectable'::text
                ELSE ''::text
            END) ||
            CASE
                WHEN (((s.advertising_event)::integer & 2) <> 0) THEN '_scannable'::text
                ELSE ''::text
            END) ||
            CASE
                WHEN (((s.advertising_event)::integer & 4) <> 0) THEN '_directed'::text
                ELSE ''::text
            END) ||
            CASE
                WHEN (((s.advertising_event)::integer & 8) <> 0) THEN '_scan_rsp'::text
                ELSE ''::text
            END)
        END AS advertising_event,
    s.url
   FROM (beaconflow.beacon_state s
     FULL JOIN beaconflow.beacon_registry r ON ((r.beacon_id = s.beacon_id)));

ALTER TABLE beaconflow.beacons OWNER TO postgres;

--
-- Name: device_info_state; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.device_info_state (
    beacon_id text NOT NULL,
    name text NOT NULL,
    value text NOT NULL,
    site_id text NOT NULL,
    agent_id text NOT NULL,
    read_at timestamp with time zone NOT NULL
);

ALTER TABLE beaconflow.device_info_state OWNER TO postgres;

--
-- Name: device_info; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.device_info AS
 SELECT device_info_state.beacon_id,
    device_info_state.site_id,
    device_info_state.agent_id,
    device_info_state.name,
    device_info_state.value,
    device_info_state.read_at
   FROM beaconflow.device_info_state;

ALTER TABLE beaconflow.device_info OWNER TO postgres;

--
-- Name: fleet_health_state; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.fleet_health_state (
    beacon_id text NOT NULL,
    site_id text NOT NULL,
    last_seen timestamp with time zone NOT NULL,
    state bytea NOT NULL
);

ALTER TABLE beaconflow.fleet_health_state OWNER TO postgres;

--
-- Name: ingest_instances; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.ingest_instances (
    instance text NOT NULL,
    backend_pid integer NOT NULL,
    joined_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    sites_digest text,
    status jsonb,
    status_at timestamp with time zone
);

ALTER TABLE beaconflow.ingest_instances OWNER TO postgres;

--
-- Name: ingest_status; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.ingest_status AS
 SELECT i.instance,
    i.joined_at,
    i.status_at,
    ((i.status ->> 'lag_s'::text))::double precision AS lag_s,
    ((i.status ->> 'batches_per_s'::text))::double precision AS batches_per_s,
    ((i.status ->> 'sightings_per_s'::text))::double precision AS sightings_per_s,
    ((i.status ->> 'batches_committed'::text))::bigint AS batches_committed,
    ((i.status ->> 'batches_rejected'::text))::bigint AS batches_rejected,
    ((i.status ->> 'brokers_connected'::text))::integer AS brokers_connected,
    ((i.status ->> 'brokers'::text))::integer AS brokers,
    ((i.status ->> 'database_connected'::text))::boolean AS database_connected
   FROM beaconflow.ingest_instances i
  WHERE ((i.expires_at > now()) AND (EXISTS ( SELECT 1
           FROM pg_stat_activity a
          WHERE (a.pid = i.backend_pid))));

ALTER TABLE beaconflow.ingest_status OWNER TO postgres;

--
-- Name: rejected_batches; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.rejected_batches (
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    topic text NOT NULL,
    reason text NOT NULL,
    payload bytea NOT NULL,
    detail text,
    payload_bytes integer,
    site_id text,
    agent_id text,
    sequence bigint
);

ALTER TABLE beaconflow.rejected_batches OWNER TO postgres;

--
-- Name: schema_migrations; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE beaconflow.schema_migrations OWNER TO postgres;

--
-- Name: sensor_readings_raw; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.sensor_readings_raw (
    ts timestamp with time zone NOT NULL,
    site_id text NOT NULL,
    agent_id text NOT NULL,
    beacon_id text NOT NULL,
    quantity text NOT NULL,
    value double precision NOT NULL,
    unit text NOT NULL,
    frame_hash bigint NOT NULL
)
PARTITION BY RANGE (ts);

ALTER TABLE beaconflow.sensor_readings_raw OWNER TO postgres;

--
-- Name: telemetry_raw; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.telemetry_raw (
    ts timestamp with time zone NOT NULL,
    battery_mv integer,
    temperature_c real,
    adv_count bigint,
    uptime_s double precision,
    site_id text,
    agent_id text,
    beacon_key integer NOT NULL
)
PARTITION BY RANGE (ts);

ALTER TABLE beaconflow.telemetry_raw OWNER TO postgres;

--
-- Name: sensor_readings; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.sensor_readings AS
 SELECT sensor_readings_raw.ts,
    sensor_readings_raw.site_id,
    sensor_readings_raw.agent_id,
    sensor_readings_raw.beacon_id,
    sensor_readings_raw.quantity,
    sensor_readings_raw.value,
    sensor_readings_raw.unit
   FROM beaconflow.sensor_readings_raw
UNION ALL
 SELECT t.ts,
    t.site_id,
    t.agent_id,
    b.beacon_id,
    q.quantity,
    q.value,
    q.unit
   FROM ((beaconflow.telemetry_raw t
     JOIN beaconflow.beacon_keys b ON ((b.beacon_key = t.beacon_key)))
     CROSS JOIN LATERAL ( VALUES ('battery_voltage'::text,(t.battery_mv)::double precision,'millivolt'::text), ('temperature'::text,(t.temperature_c)::double precision,'celsius'::text), ('advertising_count'::text,(t.adv_count)::double precision,'count'::text), ('uptime'::text,t.uptime_s,'second'::text)) q(quantity, value, unit))
  WHERE ((t.site_id IS NOT NULL) AND (t.agent_id IS NOT NULL) AND (q.value IS NOT NULL));

ALTER TABLE beaconflow.sensor_readings OWNER TO postgres;

--
-- Name: sighting_minutes; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.sighting_minutes (
    minute timestamp with time zone NOT NULL,
    source_key integer NOT NULL,
    beacon_key integer NOT NULL,
    sightings integer NOT NULL,
    rssi_min smallint NOT NULL,
    rssi_max smallint NOT NULL,
    rssi_sum bigint NOT NULL
);

ALTER TABLE beaconflow.sighting_minutes OWNER TO postgres;

--
-- Name: sighting_packs; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.sighting_packs (
    ts timestamp with time zone NOT NULL,
    source_key integer NOT NULL,
    beacon_key integer NOT NULL,
    tx_power smallint,
    readings bigint[],
    reading_ms smallint[],
    reading_rssi "char"[],
    reading_smoothed smallint[],
    reading_smoothed_half "char"[]
)
PARTITION BY RANGE (ts);

ALTER TABLE beaconflow.sighting_packs OWNER TO postgres;

--
-- Name: sighting_sources; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.sighting_sources (
    source_key integer NOT NULL,
    site_id text NOT NULL,
    agent_id text NOT NULL,
    zone_id text,
    rssi_offset_db double precision,
    path_loss_exponent double precision
);

ALTER TABLE beaconflow.sighting_sources OWNER TO postgres;

--
-- Name: sightings_raw; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.sightings_raw (
    ts timestamp with time zone NOT NULL,
    site_id text NOT NULL,
    agent_id text NOT NULL,
    zone_id text,
    beacon_id text NOT NULL,
    rssi smallint NOT NULL,
    tx_power smallint,
    distance_m real,
    smoothed_distance_m real
)
PARTITION BY RANGE (ts);

ALTER TABLE beaconflow.sightings_raw OWNER TO postgres;

--
-- Name: sighting_readings; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.sighting_readings AS
 SELECT sightings_raw.ts AS stored_ts,
    sightings_raw.ts,
    sightings_raw.site_id,
    sightings_raw.agent_id,
    sightings_raw.zone_id AS agent_zone_id,
    sightings_raw.beacon_id,
    sightings_raw.rssi,
    sightings_raw.tx_power,
    sightings_raw.distance_m,
    sightings_raw.smoothed_distance_m
   FROM beaconflow.sightings_raw
UNION ALL
 SELECT p.ts AS stored_ts,
    (p.ts + ((r.offset_us)::double precision * '00:00:00.000001'::interval)) AS ts,
    s.site_id,
    s.agent_id,
    s.zone_id AS agent_zone_id,
    b.beacon_id,
    r.rssi,
    p.tx_power,
    (power((10)::double precision, (((p.tx_power)::double precision - ((r.rssi)::double precision + s.rssi_offset_db)) / ((10)::double precision * s.path_loss_exponent))))::real AS distance_m,
    (power((10)::double precision, (((p.tx_power)::double precision - ((r.smoothed_centi_db)::double precision / (100.0)::double precision)) / ((10)::double precision * s.path_loss_exponent))))::real AS smoothed_distance_m
   FROM (((beaconflow.sighting_packs p
     JOIN beaconflow.sighting_sources s ON ((s.source_key = p.source_key)))
     JOIN beaconflow.beacon_keys b ON ((b.beacon_key = p.beacon_key)))
     CROSS JOIN LATERAL beaconflow.pack_readings(p.readings, p.reading_ms, p.reading_rssi, p.reading_smoothed, p.reading_smoothed_half) r(offset_us, rssi, smoothed_centi_db));

ALTER TABLE beaconflow.sighting_readings OWNER TO postgres;

--
-- Name: sighting_sources_source_key_seq; Type: SEQUENCE; Schema: beaconflow; Owner: postgres
--

ALTER TABLE beaconflow.sighting_sources ALTER COLUMN source_key ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME beaconflow.sighting_sources_source_key_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: sightings; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.sightings AS
 SELECT sighting_readings.ts,
    sighting_readings.site_id,
    sighting_readings.agent_id,
    sighting_readings.agent_zone_id,
    sighting_readings.beacon_id,
    sighting_readings.rssi,
    sighting_readings.tx_power,
    sighting_readings.distance_m,
    sighting_readings.smoothed_distance_m
   FROM beaconflow.sighting_readings;

ALTER TABLE beaconflow.sightings OWNER TO postgres;

--
-- Name: sightings_minute; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.sightings_minute AS
 SELECT m.minute,
    s.site_id,
    s.agent_id,
    s.zone_id AS agent_zone_id,
    b.beacon_id,
    m.sightings,
    m.rssi_min,
    ((m.rssi_sum)::double precision / (m.sightings)::double precision) AS rssi_mean,
    m.rssi_max
   FROM ((beaconflow.sighting_minutes m
     JOIN beaconflow.sighting_sources s ON ((s.source_key = m.source_key)))
     JOIN beaconflow.beacon_keys b ON ((b.beacon_key = m.beacon_key)));

ALTER TABLE beaconflow.sightings_minute OWNER TO postgres;

--
-- Name: site_claims; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.site_claims (
    site_id text NOT NULL,
    instance text NOT NULL,
    claimed_at timestamp with time zone NOT NULL,
    backend_pid integer NOT NULL,
    epoch bigint DEFAULT 0 NOT NULL,
    expires_at timestamp with time zone DEFAULT '-infinity'::timestamp with time zone NOT NULL
);

ALTER TABLE beaconflow.site_claims OWNER TO postgres;

--
-- Name: site_owners; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.site_owners AS
 SELECT c.site_id,
    c.instance,
    c.claimed_at AS since,
    c.expires_at AS lease_expires
   FROM beaconflow.site_claims c
  WHERE ((c.expires_at > now()) AND (EXISTS ( SELECT 1
           FROM pg_stat_activity a
          WHERE (a.pid = c.backend_pid))));

ALTER TABLE beaconflow.site_owners OWNER TO postgres;

--
-- Name: telemetry; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.telemetry AS
 SELECT t.ts,
    b.beacon_id,
    t.battery_mv,
    t.temperature_c,
    t.adv_count,
    t.uptime_s,
    t.site_id,
    t.agent_id
   FROM (beaconflow.telemetry_raw t
     JOIN beaconflow.beacon_keys b ON ((b.beacon_key = t.beacon_key)));

ALTER TABLE beaconflow.telemetry OWNER TO postgres;

--
-- Name: visits; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.visits AS
 SELECT visits_raw.site_id,
    visits_raw.zone_id,
    visits_raw.beacon_id,
    visits_raw.enter_ts,
    visits_raw.exit_ts,
    (EXTRACT(epoch FROM (visits_raw.exit_ts - visits_raw.enter_ts)))::double precision AS dwell_s
   FROM beaconflow.visits_raw;

ALTER TABLE beaconflow.visits OWNER TO postgres;

--
-- Name: waiting_frames; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.waiting_frames (
    site_id text NOT NULL,
    agent_id text NOT NULL,
    address bigint NOT NULL,
    ts bigint NOT NULL,
    frame bytea NOT NULL
);

ALTER TABLE beaconflow.waiting_frames OWNER TO postgres;

--
-- Name: zone_checkpoints; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.zone_checkpoints (
    site_id text NOT NULL,
    watermark timestamp with time zone NOT NULL,
    saved_at timestamp with time zone DEFAULT now() NOT NULL,
    state bytea NOT NULL
);

ALTER TABLE beaconflow.zone_checkpoints OWNER TO postgres;

--
-- Name: zone_occupancy_minute; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.zone_occupancy_minute (
    site_id text NOT NULL,
    zone_id text NOT NULL,
    bucket timestamp with time zone NOT NULL,
    occupants integer NOT NULL,
    occupant_seconds double precision
);

ALTER TABLE beaconflow.zone_occupancy_minute OWNER TO postgres;

--
-- Name: zone_occupancy; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.zone_occupancy AS
 SELECT zone_occupancy_minute.site_id,
    zone_occupancy_minute.zone_id,
    zone_occupancy_minute.bucket,
    zone_occupancy_minute.occupants,
    zone_occupancy_minute.occupant_seconds
   FROM beaconflow.zone_occupancy_minute;

ALTER TABLE beaconflow.zone_occupancy OWNER TO postgres;

--
-- Name: zone_occupancy_hour; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.zone_occupancy_hour (
    site_id text NOT NULL,
    zone_id text NOT NULL,
    bucket timestamp with time zone NOT NULL,
    avg_occupants double precision NOT NULL,
    peak_occupants integer NOT NULL,
    visits bigint NOT NULL
);

ALTER TABLE beaconflow.zone_occupancy_hour OWNER TO postgres;

--
-- Name: zone_occupancy_hourly; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.zone_occupancy_hourly AS
 SELECT zone_occupancy_hour.site_id,
    zone_occupancy_hour.zone_id,
    zone_occupancy_hour.bucket,
    zone_occupancy_hour.avg_occupants,
    zone_occupancy_hour.peak_occupants,
    zone_occupancy_hour.visits
   FROM beaconflow.zone_occupancy_hour;

ALTER TABLE beaconflow.zone_occupancy_hourly OWNER TO postgres;

--
-- Name: zone_registry; Type: TABLE; Schema: beaconflow; Owner: postgres
--

CREATE TABLE beaconflow.zone_registry (
    site_id text NOT NULL,
    zone_id text NOT NULL,
    "position" integer NOT NULL,
    capacity integer,
    rect double precision[],
    CONSTRAINT zone_registry_rect_check CHECK (((rect IS NULL) OR (cardinality(rect) = 4)))
);

ALTER TABLE beaconflow.zone_registry OWNER TO postgres;

--
-- Name: zones; Type: VIEW; Schema: beaconflow; Owner: postgres
--

CREATE VIEW beaconflow.zones AS
 SELECT zone_registry.site_id,
    zone_registry.zone_id,
    zone_registry.capacity,
    zone_registry.rect[1] AS x0,
    zone_registry.rect[2] AS y0,
    zone_registry.rect[3] AS x1,
    zone_registry.rect[4] AS y1
   FROM beaconflow.zone_registry
  ORDER BY zone_registry.site_id, zone_registry."position";

ALTER TABLE beaconflow.zones OWNER TO postgres;

--
-- Name: agent_state agent_state_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.agent_state
    ADD CONSTRAINT agent_state_pkey PRIMARY KEY (site_id, agent_id);

--
-- Name: agent_zone_state agent_zone_state_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.agent_zone_state
    ADD CONSTRAINT agent_zone_state_pkey PRIMARY KEY (site_id, agent_id);

--
-- Name: batch_ranges batch_ranges_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.batch_ranges
    ADD CONSTRAINT batch_ranges_pkey PRIMARY KEY (site_id, agent_id, last_sequence);

--
-- Name: batches batches_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.batches
    ADD CONSTRAINT batches_pkey PRIMARY KEY (site_id, agent_id, sequence);

--
-- Name: beacon_keys beacon_keys_beacon_id_key; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.beacon_keys
    ADD CONSTRAINT beacon_keys_beacon_id_key UNIQUE (beacon_id);

--
-- Name: beacon_keys beacon_keys_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.beacon_keys
    ADD CONSTRAINT beacon_keys_pkey PRIMARY KEY (beacon_key);

--
-- Name: beacon_live_position beacon_live_position_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.beacon_live_position
    ADD CONSTRAINT beacon_live_position_pkey PRIMARY KEY (site_id, beacon_id);

--
-- Name: beacon_live_zone beacon_live_zone_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.beacon_live_zone
    ADD CONSTRAINT beacon_live_zone_pkey PRIMARY KEY (site_id, beacon_id);

--
-- Name: beacon_position_minutes beacon_position_minutes_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.beacon_position_minutes
    ADD CONSTRAINT beacon_position_minutes_pkey PRIMARY KEY (site_id, beacon_id, minute);

--
-- Name: beacon_registry beacon_registry_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.beacon_registry
    ADD CONSTRAINT beacon_registry_pkey PRIMARY KEY (beacon_id);

--
-- Name: beacon_state beacon_state_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.beacon_state
    ADD CONSTRAINT beacon_state_pkey PRIMARY KEY (beacon_id);

--
-- Name: agent_state committed_through_in_range; Type: CHECK CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE beaconflow.agent_state
    ADD CONSTRAINT committed_through_in_range CHECK (((committed_through >= 0) AND (committed_through <= '4611686018427387904'::bigint))) NOT VALID;

--
-- Name: device_info_state device_info_state_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.device_info_state
    ADD CONSTRAINT device_info_state_pkey PRIMARY KEY (beacon_id, name);

--
-- Name: fleet_health_state fleet_health_state_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.fleet_health_state
    ADD CONSTRAINT fleet_health_state_pkey PRIMARY KEY (beacon_id);

--
-- Name: ingest_instances ingest_instances_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.ingest_instances
    ADD CONSTRAINT ingest_instances_pkey PRIMARY KEY (instance);

--
-- Name: night_forecasts night_forecasts_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.night_forecasts
    ADD CONSTRAINT night_forecasts_pkey PRIMARY KEY (site_id, night);

--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

--
-- Name: settings settings_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.settings
    ADD CONSTRAINT settings_pkey PRIMARY KEY (key);

--
-- Name: sighting_minutes sighting_minutes_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.sighting_minutes
    ADD CONSTRAINT sighting_minutes_pkey PRIMARY KEY (beacon_key, minute, source_key);

--
-- Name: sighting_sources sighting_sources_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.sighting_sources
    ADD CONSTRAINT sighting_sources_pkey PRIMARY KEY (source_key);

--
-- Name: site_claims site_claims_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.site_claims
    ADD CONSTRAINT site_claims_pkey PRIMARY KEY (site_id);

--
-- Name: site_registry site_registry_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.site_registry
    ADD CONSTRAINT site_registry_pkey PRIMARY KEY (site_id);

--
-- Name: visits_raw visits_raw_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.visits_raw
    ADD CONSTRAINT visits_raw_pkey PRIMARY KEY (site_id, beacon_id, enter_ts);

--
-- Name: waiting_frames waiting_frames_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.waiting_frames
    ADD CONSTRAINT waiting_frames_pkey PRIMARY KEY (site_id, agent_id, address, ts);

--
-- Name: zone_checkpoints zone_checkpoints_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.zone_checkpoints
    ADD CONSTRAINT zone_checkpoints_pkey PRIMARY KEY (site_id);

--
-- Name: zone_occupancy_hour zone_occupancy_hour_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.zone_occupancy_hour
    ADD CONSTRAINT zone_occupancy_hour_pkey PRIMARY KEY (site_id, zone_id, bucket);

--
-- Name: zone_occupancy_minute zone_occupancy_minute_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.zone_occupancy_minute
    ADD CONSTRAINT zone_occupancy_minute_pkey PRIMARY KEY (site_id, zone_id, bucket);

--
-- Name: zone_registry zone_registry_pkey; Type: CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.zone_registry
    ADD CONSTRAINT zone_registry_pkey PRIMARY KEY (site_id, zone_id);

--
-- Name: beacon_position_minutes_minute_idx; Type: INDEX; Schema: beaconflow; Owner: postgres
--

CREATE INDEX beacon_position_minutes_minute_idx ON beaconflow.beacon_position_minutes USING brin (minute);

--
-- Name: fleet_health_state_site; Type: INDEX; Schema: beaconflow; Owner: postgres
--

CREATE INDEX fleet_health_state_site ON beaconflow.fleet_health_state USING btree (site_id);

--
-- Name: rejected_batches_agent; Type: INDEX; Schema: beaconflow; Owner: postgres
--

CREATE INDEX rejected_batches_agent ON beaconflow.rejected_batches USING btree (site_id, agent_id, sequence);

--
-- Name: rejected_batches_received_at_idx; Type: INDEX; Schema: beaconflow; Owner: postgres
--

CREATE INDEX rejected_batches_received_at_idx ON beaconflow.rejected_batches USING btree (received_at);

--
-- Name: sensor_readings_raw_beacon_id_frame_hash_ts_idx; Type: INDEX; Schema: beaconflow; Owner: postgres
--

CREATE INDEX sensor_readings_raw_beacon_id_frame_hash_ts_idx ON ONLY beaconflow.sensor_readings_raw USING btree (beacon_id, frame_hash, ts);

--
-- Name: sensor_readings_raw_site_id_ts_idx; Type: INDEX; Schema: beaconflow; Owner: postgres
--

CREATE INDEX sensor_readings_raw_site_id_ts_idx ON ONLY beaconflow.sensor_readings_raw USING btree (site_id, ts);

--
-- Name: sighting_minutes_minute_idx; Type: INDEX; Schema: beaconflow; Owner: postgres
--

CREATE INDEX sighting_minutes_minute_idx ON beaconflow.sighting_minutes USING brin (minute);

--
-- Name: sighting_packs_beacon_key_ts_idx; Type: INDEX; Schema: beaconflow; Owner: postgres
--

CREATE INDEX sighting_packs_beacon_key_ts_idx ON ONLY beaconflow.sighting_packs USING btree (beacon_key, ts);

--
-- Name: sighting_packs_ts_idx; Type: INDEX; Schema: beaconflow; Owner: postgres
--

CREATE INDEX sighting_packs_ts_idx ON ONLY beaconflow.sighting_packs USING brin (ts);

--
-- Name: sighting_sources_identity; Type: INDEX; Schema: beaconflow; Owner: postgres
--

CREATE UNIQUE INDEX sighting_sources_identity ON beaconflow.sighting_sources USING btree (site_id, agent_id, COALESCE(zone_id, ''::text), ((zone_id IS NULL)), COALESCE(rssi_offset_db, 'NaN'::double precision), COALESCE(path_loss_exponent, 'NaN'::double precision));

--
-- Name: sighting_sources_site_id_idx; Type: INDEX; Schema: beaconflow; Owner: postgres
--

CREATE INDEX sighting_sources_site_id_idx ON beaconflow.sighting_sources USING btree (site_id);

--
-- Name: sightings_raw_beacon_id_ts_idx; Type: INDEX; Schema: beaconflow; Owner: postgres
--

CREATE INDEX sightings_raw_beacon_id_ts_idx ON ONLY beaconflow.sightings_raw USING btree (beacon_id, ts);

--
-- Name: sightings_raw_site_id_ts_idx; Type: INDEX; Schema: beaconflow; Owner: postgres
--

CREATE INDEX sightings_raw_site_id_ts_idx ON ONLY beaconflow.sightings_raw USING btree (site_id, ts);

--
-- Name: telemetry_raw_beacon_key_ts_idx; Type: INDEX; Schema: beaconflow; Owner: postgres
--

CREATE INDEX telemetry_raw_beacon_key_ts_idx ON ONLY beaconflow.telemetry_raw USING btree (beacon_key, ts);

--
-- Name: visits_raw_site_id_zone_id_enter_ts_idx; Type: INDEX; Schema: beaconflow; Owner: postgres
--

CREATE INDEX visits_raw_site_id_zone_id_enter_ts_idx ON beaconflow.visits_raw USING btree (site_id, zone_id, enter_ts);

--
-- Name: agent_state progress_only_as_far_as_stored; Type: TRIGGER; Schema: beaconflow; Owner: postgres
--

CREATE TRIGGER progress_only_as_far_as_stored BEFORE INSERT OR UPDATE OF committed_through ON beaconflow.agent_state FOR EACH ROW EXECUTE FUNCTION beaconflow.check_progress();

--
-- Name: fleet_health_state fleet_health_state_beacon_id_fkey; Type: FK CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.fleet_health_state
    ADD CONSTRAINT fleet_health_state_beacon_id_fkey FOREIGN KEY (beacon_id) REFERENCES beaconflow.beacon_state(beacon_id) ON DELETE CASCADE;

--
-- Name: zone_registry zone_registry_site_id_fkey; Type: FK CONSTRAINT; Schema: beaconflow; Owner: postgres
--

ALTER TABLE ONLY beaconflow.zone_registry
    ADD CONSTRAINT zone_registry_site_id_fkey FOREIGN KEY (site_id) REFERENCES beaconflow.site_registry(site_id) ON DELETE CASCADE;

--
-- Name: SCHEMA beaconflow; Type: ACL; Schema: -; Owner: postgres
--

GRANT USAGE ON SCHEMA beaconflow TO beaconflow_writer;
GRANT USAGE ON SCHEMA beaconflow TO beaconflow_reader;

--
-- Name: FUNCTION check_lease_seconds(seconds double precision); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.check_lease_seconds(seconds double precision) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.check_lease_seconds(seconds double precision) TO beaconflow_writer;

--
-- Name: FUNCTION claim_site(site text, instance text, lease_seconds double precision); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.claim_site(site text, instance text, lease_seconds double precision) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.claim_site(site text, instance text, lease_seconds double precision) TO beaconflow_writer;

--
-- Name: FUNCTION compact_sighting_packs(site text, from_ts timestamp with time zone, until_ts timestamp with time zone); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.compact_sighting_packs(site text, from_ts timestamp with time zone, until_ts timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.compact_sighting_packs(site text, from_ts timestamp with time zone, until_ts timestamp with time zone) TO beaconflow_writer;

--
-- Name: FUNCTION drop_partitions_before(cutoff date); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.drop_partitions_before(cutoff date) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.drop_partitions_before(cutoff date) TO beaconflow_writer;

--
-- Name: FUNCTION ensure_partitions(first_day date, days integer); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.ensure_partitions(first_day date, days integer) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.ensure_partitions(first_day date, days integer) TO beaconflow_writer;

--
-- Name: FUNCTION fold_batches(site text, until_ts timestamp with time zone); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.fold_batches(site text, until_ts timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.fold_batches(site text, until_ts timestamp with time zone) TO beaconflow_writer;

--
-- Name: FUNCTION hold_sites(instance text, sites text[], epochs bigint[]); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.hold_sites(instance text, sites text[], epochs bigint[]) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.hold_sites(instance text, sites text[], epochs bigint[]) TO beaconflow_writer;

--
-- Name: FUNCTION join_instances(instance text, lease_seconds double precision); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.join_instances(instance text, lease_seconds double precision) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.join_instances(instance text, lease_seconds double precision) TO beaconflow_writer;

--
-- Name: FUNCTION lease_held(expires_at timestamp with time zone, backend_pid integer); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.lease_held(expires_at timestamp with time zone, backend_pid integer) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.lease_held(expires_at timestamp with time zone, backend_pid integer) TO beaconflow_writer;

--
-- Name: FUNCTION leave_instances(instance text); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.leave_instances(instance text) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.leave_instances(instance text) TO beaconflow_writer;

--
-- Name: FUNCTION make_partitions(first_day date, days integer); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.make_partitions(first_day date, days integer) FROM PUBLIC;

--
-- Name: FUNCTION merge_address_beacon(site text, address_beacon text, beacon text); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.merge_address_beacon(site text, address_beacon text, beacon text) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.merge_address_beacon(site text, address_beacon text, beacon text) TO beaconflow_writer;

--
-- Name: FUNCTION pack_readings(readings bigint[], reading_ms smallint[], reading_rssi "char"[], reading_smoothed smallint[], reading_smoothed_half "char"[]); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.pack_readings(readings bigint[], reading_ms smallint[], reading_rssi "char"[], reading_smoothed smallint[], reading_smoothed_half "char"[]) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.pack_readings(readings bigint[], reading_ms smallint[], reading_rssi "char"[], reading_smoothed smallint[], reading_smoothed_half "char"[]) TO beaconflow_reader;
GRANT ALL ON FUNCTION beaconflow.pack_readings(readings bigint[], reading_ms smallint[], reading_rssi "char"[], reading_smoothed smallint[], reading_smoothed_half "char"[]) TO beaconflow_writer;

--
-- Name: FUNCTION prune_positions(); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.prune_positions() FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.prune_positions() TO beaconflow_writer;

--
-- Name: FUNCTION prune_rejections(); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.prune_rejections() FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.prune_rejections() TO beaconflow_writer;

--
-- Name: FUNCTION refresh_zone_hours(sites text[], zones text[], hours timestamp with time zone[]); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.refresh_zone_hours(sites text[], zones text[], hours timestamp with time zone[]) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.refresh_zone_hours(sites text[], zones text[], hours timestamp with time zone[]) TO beaconflow_writer;

--
-- Name: FUNCTION release_site(instance text, site text, epoch bigint); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.release_site(instance text, site text, epoch bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.release_site(instance text, site text, epoch bigint) TO beaconflow_writer;

--
-- Name: FUNCTION renew_sites(instance text, sites text[], epochs bigint[], lease_seconds double precision); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.renew_sites(instance text, sites text[], epochs bigint[], lease_seconds double precision) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.renew_sites(instance text, sites text[], epochs bigint[], lease_seconds double precision) TO beaconflow_writer;

--
-- Name: FUNCTION set_instance_status(instance text, status jsonb); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.set_instance_status(instance text, status jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.set_instance_status(instance text, status jsonb) TO beaconflow_writer;

--
-- Name: FUNCTION set_sites_digest(instance text, digest text); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.set_sites_digest(instance text, digest text) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.set_sites_digest(instance text, digest text) TO beaconflow_writer;

--
-- Name: FUNCTION sightings_between(from_ts timestamp with time zone, until_ts timestamp with time zone); Type: ACL; Schema: beaconflow; Owner: postgres
--

REVOKE ALL ON FUNCTION beaconflow.sightings_between(from_ts timestamp with time zone, until_ts timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION beaconflow.sightings_between(from_ts timestamp with time zone, until_ts timestamp with time zone) TO beaconflow_reader;
GRANT ALL ON FUNCTION beaconflow.sightings_between(from_ts timestamp with time zone, until_ts timestamp with time zone) TO beaconflow_writer;

--
-- Name: TABLE agent_state; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE beaconflow.agent_state TO beaconflow_writer;

--
-- Name: TABLE agent_zone_state; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE beaconflow.agent_zone_state TO beaconflow_writer;

--
-- Name: TABLE settings; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT ON TABLE beaconflow.settings TO beaconflow_writer;

--
-- Name: TABLE agent_health; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE beaconflow.agent_health TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.agent_health TO beaconflow_reader;

--
-- Name: TABLE batch_ranges; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.batch_ranges TO beaconflow_writer;

--
-- Name: TABLE batches; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.batches TO beaconflow_writer;

--
-- Name: TABLE beacon_state; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE beaconflow.beacon_state TO beaconflow_writer;

--
-- Name: TABLE beacon_health; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE beaconflow.beacon_health TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.beacon_health TO beaconflow_reader;

--
-- Name: TABLE beacon_live_zone; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE beaconflow.beacon_live_zone TO beaconflow_writer;

--
-- Name: TABLE beacon_registry; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE beaconflow.beacon_registry TO beaconflow_writer;

--
-- Name: TABLE site_registry; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE beaconflow.site_registry TO beaconflow_writer;

--
-- Name: TABLE visits_raw; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE beaconflow.visits_raw TO beaconflow_writer;

--
-- Name: TABLE beacon_locations; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.beacon_locations TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.beacon_locations TO beaconflow_reader;

--
-- Name: TABLE night_forecasts; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.night_forecasts TO beaconflow_writer;

--
-- Name: TABLE battery_replacements; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.battery_replacements TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.battery_replacements TO beaconflow_reader;

--
-- Name: TABLE beacon_keys; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.beacon_keys TO beaconflow_writer;

--
-- Name: TABLE beacon_live_position; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE beaconflow.beacon_live_position TO beaconflow_writer;

--
-- Name: TABLE beacon_position_minutes; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE beaconflow.beacon_position_minutes TO beaconflow_writer;

--
-- Name: TABLE beacon_position_history; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.beacon_position_history TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.beacon_position_history TO beaconflow_reader;

--
-- Name: TABLE beacon_positions; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.beacon_positions TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.beacon_positions TO beaconflow_reader;

--
-- Name: TABLE beacons; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.beacons TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.beacons TO beaconflow_reader;

--
-- Name: TABLE device_info_state; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE beaconflow.device_info_state TO beaconflow_writer;

--
-- Name: TABLE device_info; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.device_info TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.device_info TO beaconflow_reader;

--
-- Name: TABLE fleet_health_state; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE beaconflow.fleet_health_state TO beaconflow_writer;

--
-- Name: TABLE ingest_instances; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT ON TABLE beaconflow.ingest_instances TO beaconflow_writer;

--
-- Name: TABLE ingest_status; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.ingest_status TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.ingest_status TO beaconflow_reader;

--
-- Name: TABLE rejected_batches; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE beaconflow.rejected_batches TO beaconflow_writer;

--
-- Name: TABLE schema_migrations; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE beaconflow.schema_migrations TO beaconflow_writer;

--
-- Name: TABLE sensor_readings_raw; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.sensor_readings_raw TO beaconflow_writer;

--
-- Name: TABLE telemetry_raw; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.telemetry_raw TO beaconflow_writer;

--
-- Name: TABLE sensor_readings; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.sensor_readings TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.sensor_readings TO beaconflow_reader;

--
-- Name: TABLE sighting_minutes; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE beaconflow.sighting_minutes TO beaconflow_writer;

--
-- Name: TABLE sighting_packs; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.sighting_packs TO beaconflow_writer;

--
-- Name: TABLE sighting_sources; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.sighting_sources TO beaconflow_writer;

--
-- Name: TABLE sightings_raw; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.sightings_raw TO beaconflow_writer;

--
-- Name: TABLE sighting_readings; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.sighting_readings TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.sighting_readings TO beaconflow_reader;

--
-- Name: TABLE sightings; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE beaconflow.sightings TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.sightings TO beaconflow_reader;

--
-- Name: TABLE sightings_minute; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.sightings_minute TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.sightings_minute TO beaconflow_reader;

--
-- Name: TABLE site_claims; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT ON TABLE beaconflow.site_claims TO beaconflow_writer;

--
-- Name: TABLE site_owners; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.site_owners TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.site_owners TO beaconflow_reader;

--
-- Name: TABLE telemetry; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE beaconflow.telemetry TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.telemetry TO beaconflow_reader;

--
-- Name: TABLE visits; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE beaconflow.visits TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.visits TO beaconflow_reader;

--
-- Name: TABLE waiting_frames; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,DELETE ON TABLE beaconflow.waiting_frames TO beaconflow_writer;

--
-- Name: TABLE zone_checkpoints; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE beaconflow.zone_checkpoints TO beaconflow_writer;

--
-- Name: TABLE zone_occupancy_minute; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE beaconflow.zone_occupancy_minute TO beaconflow_writer;

--
-- Name: TABLE zone_occupancy; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE beaconflow.zone_occupancy TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.zone_occupancy TO beaconflow_reader;

--
-- Name: TABLE zone_occupancy_hour; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,UPDATE ON TABLE beaconflow.zone_occupancy_hour TO beaconflow_writer;

--
-- Name: TABLE zone_occupancy_hourly; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE beaconflow.zone_occupancy_hourly TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.zone_occupancy_hourly TO beaconflow_reader;

--
-- Name: TABLE zone_registry; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE beaconflow.zone_registry TO beaconflow_writer;

--
-- Name: TABLE zones; Type: ACL; Schema: beaconflow; Owner: postgres
--

GRANT SELECT,INSERT ON TABLE beaconflow.zones TO beaconflow_writer;
GRANT SELECT ON TABLE beaconflow.zones TO beaconflow_reader;

--
-- Name: DEFAULT PRIVILEGES FOR TABLES; Type: DEFAULT ACL; Schema: beaconflow; Owner: postgres
--

ALTER DEFAULT PRIVILEGES FOR ROLE postgres IN SCHEMA beaconflow GRANT SELECT,INSERT ON TABLES  TO beaconflow_writer;

--
-- PostgreSQL database dump complete
--
