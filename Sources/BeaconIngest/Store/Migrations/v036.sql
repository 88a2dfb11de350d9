-- a forecast night is read until noon of its morning
--
-- `battery_replacements` read a site's forecast night for today (the date of the morning the low comes) all day,
-- after its low had passed: an outdoor cell that night would have stopped kept it as `cold_night`, and a
-- `replace_by` of that past midnight, until the day ended. A night now counts until noon of its morning in the
-- site's time zone (a night's low has come by then: forecasts take it over the night to the morning), then the
-- next cold night, if any, takes its place.

CREATE OR REPLACE VIEW beaconflow.battery_replacements AS
    SELECT h.site_id, h.beacon_id, l.label,
           LEAST(h.replace_by, c.night::timestamp AT TIME ZONE coalesce(s.timezone, 'UTC')) AS replace_by,
           h.est_days_left, h.days_left_low, h.days_left_high,
           h.forecast, h.battery_mv, h.battery_pct, h.status, l.zone_id AS last_zone_id, h.last_seen,
           h.coldest_carried_c, c.night AS cold_night, c.low_c AS cold_night_low_c
    FROM beaconflow.beacon_health h
    LEFT JOIN beaconflow.beacon_locations l USING (beacon_id)
    LEFT JOIN beaconflow.beacon_registry r ON r.beacon_id = h.beacon_id
    LEFT JOIN beaconflow.site_registry s ON s.site_id = h.site_id
    LEFT JOIN LATERAL (
        SELECT f.night, f.low_c FROM beaconflow.night_forecasts f
        WHERE r.outdoors AND f.site_id = h.site_id AND f.low_c <= h.coldest_carried_c
          AND f.night > ((now() AT TIME ZONE coalesce(s.timezone, 'UTC')) - interval '12 hours')::date
        ORDER BY f.night LIMIT 1) c ON true
    WHERE h.replace_by IS NOT NULL;
