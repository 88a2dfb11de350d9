-- cloned beacons: an identity advertised from two addresses at once
--
-- `beacon_health.status` may be `cloned`: the beacon's iBeacon, AltBeacon or Eddystone-UID identity has been heard
-- from two device addresses at once for a minute, and `cloned_since` says since when (event time; null when not
-- cloned).

ALTER TABLE beaconflow.beacon_state
    ADD COLUMN cloned_since timestamptz,
    DROP CONSTRAINT beacon_state_status_check,
    ADD CONSTRAINT beacon_state_status_check CHECK (status IN ('ok', 'low_battery', 'stale', 'rebooting', 'cloned'));

CREATE OR REPLACE VIEW beaconflow.beacon_health AS
    SELECT beacon_id, site_id, last_seen, battery_mv, battery_trend_mv_per_day, est_days_left, temperature_c,
           reboots_7d,
           CASE WHEN last_seen < now() - (SELECT value::integer FROM beaconflow.settings
                                          WHERE key = 'stale_after_minutes') * interval '1 minute'
                THEN 'stale' ELSE status END AS status,
           battery_pct, battery_trend_pct_per_day, cloned_since
    FROM beaconflow.beacon_state;
