-- the coldest night a cell carries
--
-- `beacon_health.coldest_carried_c`: for a charge-counting forecast, the coldest temperature (°C, -40 to +60) at
-- which the cell, with the charge it has left and the sag under a burst learned from its own readings, still reads
-- above its cutoff; a night colder than that stops the beacon until it warms. `battery_replacements` carries it
-- too. The address beacons' merge keeps it with the other forecast columns.

ALTER TABLE beaconflow.beacon_state ADD COLUMN coldest_carried_c real;

CREATE OR REPLACE VIEW beaconflow.beacon_health AS
    SELECT beacon_id, site_id, last_seen, battery_mv, battery_trend_mv_per_day, est_days_left, temperature_c,
           reboots_7d,
           CASE WHEN last_seen < now() - (SELECT value::integer FROM beaconflow.settings
                                          WHERE key = 'stale_after_minutes') * interval '1 minute'
                THEN 'stale' ELSE status END AS status,
           battery_pct, battery_trend_pct_per_day, cloned_since,
           days_left_low, days_left_high, replace_by, charge_left_pct, cell_since, forecast, coldest_carried_c
    FROM beaconflow.beacon_state;

CREATE OR REPLACE VIEW beaconflow.battery_replacements AS
    SELECT h.site_id, h.beacon_id, l.label, h.replace_by, h.est_days_left, h.days_left_low, h.days_left_high,
           h.forecast, h.battery_mv, h.battery_pct, h.status, l.zone_id AS last_zone_id, h.last_seen,
           h.coldest_carried_c
    FROM beaconflow.beacon_health h
    LEFT JOIN beaconflow.beacon_locations l USING (beacon_id)
    WHERE h.replace_by IS NOT NULL;

CREATE OR REPLACE FUNCTION beaconflow.merge_address_beacon(site text, address_beacon text, beacon text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
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
