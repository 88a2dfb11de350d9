-- battery forecasts from charge counting, and the beacons to replace
--
-- `beacon_health.est_days_left` comes from the beacon's TLM counters and voltage (charge counting) when it sends
-- Eddystone TLM, else from its voltage's or percent's trend (docs/proximity-and-occupancy.md). Beside it:
-- `days_left_low` and `days_left_high`, its 90 % interval (charge counting only); `replace_by`, when to have
-- replaced the cell (the forecast's reading plus the interval's low end, else the point estimate); `charge_left_pct`,
-- the share of its charge the cell has left, and `cell_since`, when the cell now in it was first heard or found
-- swapped for a fresh one (both charge counting only); and `forecast`, how it was found
-- (`charge_counting`, `voltage_trend` or `percent_trend`). `battery_replacements` lists the beacons with a
-- `replace_by`, the soonest first, with the zone each was last in, for a technician's round.

ALTER TABLE beaconflow.beacon_state
    ADD COLUMN days_left_low real,
    ADD COLUMN days_left_high real,
    ADD COLUMN replace_by timestamptz,
    ADD COLUMN charge_left_pct real,
    ADD COLUMN cell_since timestamptz,
    ADD COLUMN forecast text CHECK (forecast IN ('charge_counting', 'voltage_trend', 'percent_trend'));

CREATE OR REPLACE VIEW beaconflow.beacon_health AS
    SELECT beacon_id, site_id, last_seen, battery_mv, battery_trend_mv_per_day, est_days_left, temperature_c,
           reboots_7d,
           CASE WHEN last_seen < now() - (SELECT value::integer FROM beaconflow.settings
                                          WHERE key = 'stale_after_minutes') * interval '1 minute'
                THEN 'stale' ELSE status END AS status,
           battery_pct, battery_trend_pct_per_day, cloned_since,
           days_left_low, days_left_high, replace_by, charge_left_pct, cell_since, forecast
    FROM beaconflow.beacon_state;

CREATE VIEW beaconflow.battery_replacements AS
    SELECT h.site_id, h.beacon_id, l.label, h.replace_by, h.est_days_left, h.days_left_low, h.days_left_high,
           h.forecast, h.battery_mv, h.battery_pct, h.status, l.zone_id AS last_zone_id, h.last_seen
    FROM beaconflow.beacon_health h
    LEFT JOIN beaconflow.beacon_locations l USING (beacon_id)
    WHERE h.replace_by IS NOT NULL;
GRANT SELECT ON beaconflow.battery_replacements TO beaconflow_reader;
