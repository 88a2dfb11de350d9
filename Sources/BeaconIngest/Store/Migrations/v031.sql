-- address beacons merged into the beacon whose identity their address showed later
--
-- An Eddystone URL or TLM frame from an address no identity of the site claims waits for one; when the wait is
-- over it is stored under the address (`mac:...`). When an identity frame then comes from that address within its
-- lifetime, the ingest files everything stored under the address at the site under the beacon, in the
-- transaction of the batch that brought the identity: sightings and their minute rollups, telemetry, sensor
-- readings, visits, the live zone and positions; the address beacon's own state row goes. The writer may not
-- update or delete the raw tables, so this runs as their owner, for address beacons only. Running it again finds
-- nothing left to move. Returns the rows moved.

CREATE FUNCTION beaconflow.merge_address_beacon(site text, address_beacon text, beacon text)
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
REVOKE ALL ON FUNCTION beaconflow.merge_address_beacon(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION beaconflow.merge_address_beacon(text, text, text) TO beaconflow_writer;
