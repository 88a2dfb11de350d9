-- the live zone apart from the visits
--
-- `beacon_live_zone` holds each beacon's zone as its site's tracker decides it live (`enter_ts`), and when it left
-- (`exit_ts`, null while there), written by the instance serving the site in the transaction of the zone changes.
-- The visits follow the stored history (`zone_history`), decided up to the history lag later, so `beacon_locations`
-- now reads the live zone, and a beacon's newest visit only where it has no live zone (placed before this version).

CREATE TABLE beaconflow.beacon_live_zone (
    site_id text NOT NULL,
    beacon_id text NOT NULL,
    zone_id text NOT NULL,
    enter_ts timestamptz NOT NULL,
    exit_ts timestamptz,
    PRIMARY KEY (site_id, beacon_id)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON beaconflow.beacon_live_zone TO beaconflow_writer;

CREATE OR REPLACE VIEW beaconflow.beacon_locations AS
    SELECT coalesce(s.beacon_id, r.beacon_id) AS beacon_id, s.site_id, r.label, v.zone_id,
           coalesce(v.zone_id IS NOT NULL AND v.exit_ts IS NULL
                    AND s.last_seen > now() - coalesce(c.absence_timeout_s, 30) * interval '1 second', false) AS present,
           CASE WHEN v.zone_id IS NULL THEN NULL
                WHEN v.exit_ts IS NOT NULL THEN v.exit_ts
                WHEN s.last_seen > now() - coalesce(c.absence_timeout_s, 30) * interval '1 second' THEN v.enter_ts
                ELSE s.last_seen END AS since,
           s.last_seen AS last_heard
    FROM beaconflow.beacon_state s
         FULL JOIN beaconflow.beacon_registry r ON r.beacon_id = s.beacon_id
         LEFT JOIN beaconflow.site_registry c ON c.site_id = s.site_id
         LEFT JOIN LATERAL (
             SELECT l.zone_id, l.enter_ts, l.exit_ts FROM beaconflow.beacon_live_zone l
             WHERE l.site_id = s.site_id AND l.beacon_id = s.beacon_id
             UNION ALL
             SELECT w.zone_id, w.enter_ts, w.exit_ts FROM (
                 SELECT zone_id, enter_ts, exit_ts FROM beaconflow.visits_raw v
                 WHERE v.site_id = s.site_id AND v.beacon_id = s.beacon_id
                   AND NOT EXISTS (SELECT FROM beaconflow.beacon_live_zone l
                                   WHERE l.site_id = s.site_id AND l.beacon_id = s.beacon_id)
                 ORDER BY v.enter_ts DESC LIMIT 1) w) v ON true;
