-- the smoothed RSSI in one byte: half-dB steps
--
-- The ingest now stores the smoothed RSSI to the nearest half dB (it kept hundredths: finer than the whole-dB
-- RSSI it smooths). A compacted pack whose smoothed values all fall on half dB from -127.5 to 0 dBm keeps them in
-- `reading_smoothed_half` ("char"[]: twice the dBm, + 127), one byte a sighting instead of two, and
-- `reading_smoothed` null; a pack with another value (stored before this version, or out of that range) keeps
-- `reading_smoothed`. `pack_readings` reads every form: the views show the same rows as before compaction.

ALTER TABLE beaconflow.sighting_packs ADD COLUMN reading_smoothed_half "char"[];

-- A pack's readings, whichever form it has. A null array unnests to nothing and pads the others' rows with nulls,
-- so the columns' smoothed value is whichever of the two arrays the pack has.
CREATE FUNCTION beaconflow.pack_readings(readings bigint[], reading_ms smallint[], reading_rssi "char"[],
                                         reading_smoothed smallint[], reading_smoothed_half "char"[])
RETURNS TABLE (offset_us bigint, rssi smallint, smoothed_centi_db integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT x.reading >> 24, (((x.reading >> 16) & 255) - 128)::smallint, ((x.reading & 65535) - 32768)::integer
    FROM (SELECT unnest(readings) AS reading) x
    UNION ALL
    SELECT (x.ms + 32768)::bigint * 1000, x.rssi::integer::smallint,
           coalesce(x.smoothed::integer, (x.half::integer - 127) * 50)
    FROM (SELECT unnest(reading_ms) AS ms, unnest(reading_rssi) AS rssi, unnest(reading_smoothed) AS smoothed,
                 unnest(reading_smoothed_half) AS half) x
$$;
REVOKE ALL ON FUNCTION beaconflow.pack_readings(bigint[], smallint[], "char"[], smallint[], "char"[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION beaconflow.pack_readings(bigint[], smallint[], "char"[], smallint[], "char"[])
    TO beaconflow_reader, beaconflow_writer;

CREATE OR REPLACE VIEW beaconflow.sighting_readings AS
    SELECT ts AS stored_ts, ts, site_id, agent_id, zone_id AS agent_zone_id, beacon_id, rssi, tx_power, distance_m,
           smoothed_distance_m
    FROM beaconflow.sightings_raw
    UNION ALL
    SELECT p.ts AS stored_ts,
           p.ts + r.offset_us::double precision * interval '1 microsecond' AS ts,
           s.site_id, s.agent_id, s.zone_id AS agent_zone_id, b.beacon_id,
           r.rssi,
           p.tx_power,
           power(10::double precision, (p.tx_power::double precision - (r.rssi::double precision + s.rssi_offset_db))
                 / (10::double precision * s.path_loss_exponent))::real AS distance_m,
           power(10::double precision, (p.tx_power::double precision - r.smoothed_centi_db::double precision / 100.0::double precision)
                 / (10::double precision * s.path_loss_exponent))::real AS smoothed_distance_m
    FROM beaconflow.sighting_packs p
    JOIN beaconflow.sighting_sources s ON s.source_key = p.source_key
    JOIN beaconflow.beacon_keys b ON b.beacon_key = p.beacon_key
    CROSS JOIN LATERAL beaconflow.pack_readings(p.readings, p.reading_ms, p.reading_rssi, p.reading_smoothed,
                                                p.reading_smoothed_half) r;

DROP FUNCTION beaconflow.pack_readings(bigint[], smallint[], "char"[], smallint[]);

CREATE OR REPLACE FUNCTION beaconflow.compact_sighting_packs(site text, from_ts timestamptz, until_ts timestamptz)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog
-- Hundreds of thousands of packs on either side of its joins, whatever the planner estimates: hash them.
SET enable_mergejoin = off SET enable_nestloop = off AS $$
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
