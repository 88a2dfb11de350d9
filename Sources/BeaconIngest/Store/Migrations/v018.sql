-- compaction: one pack per beacon, agent and minute once a minute is closed
--
-- A live site writes one-second batches, so a minute of one beacon heard by one agent was stored in as many packs
-- as batches carried it: on a busy site 2-3 sightings per row, each row paying about 70 bytes (header, keys,
-- array header, index entry) besides its 8 bytes a sighting. `compact_sighting_packs(site, from_ts, until_ts)`
-- rewrites the site's packs stored in [from_ts, until_ts) as one pack per source, beacon, frame power and UTC
-- minute: the same readings in time order, the pack's time that of its first reading, so `sightings`,
-- `sightings_between` and `sighting_readings` (whose `stored_ts` stays within the reading's minute) show the
-- same sightings. It is one statement, done whole or not at all; done again it changes nothing. The ingest
-- instance serving a site calls it for the minutes past its compaction lag; an advisory lock per site keeps two
-- instances from compacting one site at once. Returns the number of packs written. `compaction_lag_minutes` (15)
-- says how old a minute is before the ingest compacts it.

INSERT INTO beaconflow.settings (key, value) VALUES ('compaction_lag_minutes', '15');

CREATE FUNCTION beaconflow.compact_sighting_packs(site text, from_ts timestamptz, until_ts timestamptz)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
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
        SELECT source_key, beacon_key, tx_power, date_bin('1 minute', ts, timestamptz '1970-01-01 00:00:00+00') AS minute
        FROM beaconflow.sighting_packs
        WHERE ts >= from_ts AND ts < until_ts
          AND source_key IN (SELECT source_key FROM beaconflow.sighting_sources WHERE site_id = site)
        GROUP BY 1, 2, 3, 4
        HAVING count(*) > 1
    ), removed AS (
        DELETE FROM beaconflow.sighting_packs p
        USING minutes m
        WHERE p.ts >= from_ts AND p.ts < until_ts
          AND p.source_key = m.source_key AND p.beacon_key = m.beacon_key
          AND coalesce(p.tx_power, 32767) = coalesce(m.tx_power, 32767)  -- an equality, so that it can hash
          AND date_bin('1 minute', p.ts, timestamptz '1970-01-01 00:00:00+00') = m.minute
        RETURNING p.ts, p.source_key, p.beacon_key, p.tx_power, p.readings,
                  date_bin('1 minute', p.ts, timestamptz '1970-01-01 00:00:00+00') AS minute
    ), firsts AS (
        SELECT source_key, beacon_key, tx_power, minute, min(ts) AS first_ts
        FROM removed
        GROUP BY 1, 2, 3, 4
    ), readings AS (
        -- Each reading's offset (bits 24 and up) made relative to the merged pack's time.
        SELECT f.first_ts, f.source_key, f.beacon_key, f.tx_power,
               r.reading + ((extract(epoch FROM d.ts - f.first_ts) * 1000000)::bigint << 24) AS reading
        FROM removed d
        JOIN firsts f ON f.source_key = d.source_key AND f.beacon_key = d.beacon_key
             AND coalesce(f.tx_power, 32767) = coalesce(d.tx_power, 32767) AND f.minute = d.minute
        CROSS JOIN LATERAL unnest(d.readings) AS r(reading)
    ), inserted AS (
        INSERT INTO beaconflow.sighting_packs (ts, source_key, beacon_key, tx_power, readings)
        SELECT first_ts, source_key, beacon_key, tx_power, array_agg(reading ORDER BY reading)
        FROM readings
        GROUP BY first_ts, source_key, beacon_key, tx_power
        RETURNING 1
    )
    SELECT count(*) INTO written FROM inserted;
    RETURN written;
END
$$;
REVOKE ALL ON FUNCTION beaconflow.compact_sighting_packs(text, timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION beaconflow.compact_sighting_packs(text, timestamptz, timestamptz) TO beaconflow_writer;
