-- night forecasts: the cold nights a weather forecast brings, against the cells outdoors that cannot carry them
--
-- `night_forecasts` holds, for each site, the lowest temperature a weather forecast gives for each coming night
-- (`night`: the date of the morning the low comes), written by the operator's own job from the forecast of their
-- choice. A beacon the sites file places `outdoors` hangs in that weather: `battery_replacements` gives the first
-- forecast night, from today on in the site's time zone, whose low is at or below the cell's `coldest_carried_c`
-- (`cold_night`, `cold_night_low_c`), and its `replace_by` becomes the midnight before that night when it comes
-- before the charge's.

CREATE TABLE beaconflow.night_forecasts (
    site_id text NOT NULL,
    night date NOT NULL,
    low_c real NOT NULL CHECK (low_c BETWEEN -90 AND 60),
    PRIMARY KEY (site_id, night)
);

ALTER TABLE beaconflow.beacon_registry ADD COLUMN outdoors boolean NOT NULL DEFAULT false;

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
          AND f.night >= (now() AT TIME ZONE coalesce(s.timezone, 'UTC'))::date
        ORDER BY f.night LIMIT 1) c ON true
    WHERE h.replace_by IS NOT NULL;
