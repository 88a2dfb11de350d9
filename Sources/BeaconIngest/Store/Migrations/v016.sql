-- names that say what they are: the hearing agent's zone, telemetry's site, resolved EID beacons
--
-- A sighting's zone is the zone of the agent that heard it, not the beacon's: `zone_id` of `sightings`,
-- `sighting_readings`, `sightings_minute` and `sightings_between` is now `agent_zone_id` (where a beacon is, is
-- `visits`, `beacon_locations` and `zone_occupancy`). `telemetry` gains the `site_id` (and `agent_id`) of the
-- agent that first delivered the transmission. `beacons.kind` of a beacon resolved from its EIDs with its identity
-- key is `eddystone-eid`, as `identity_source` says, not the kind its registry id looks like.

ALTER VIEW beaconflow.sighting_readings RENAME COLUMN zone_id TO agent_zone_id;
ALTER VIEW beaconflow.sightings RENAME COLUMN zone_id TO agent_zone_id;
ALTER VIEW beaconflow.sightings_minute RENAME COLUMN zone_id TO agent_zone_id;

DROP FUNCTION beaconflow.sightings_between(timestamptz, timestamptz);
CREATE FUNCTION beaconflow.sightings_between(from_ts timestamptz, until_ts timestamptz)
RETURNS TABLE (ts timestamptz, site_id text, agent_id text, agent_zone_id text, beacon_id text, rssi smallint,
               tx_power smallint, distance_m real, smoothed_distance_m real)
LANGUAGE sql STABLE AS $$
    SELECT r.ts, r.site_id, r.agent_id, r.agent_zone_id, r.beacon_id, r.rssi, r.tx_power, r.distance_m,
           r.smoothed_distance_m
    FROM beaconflow.sighting_readings r
    WHERE r.stored_ts > from_ts - interval '1 minute' AND r.stored_ts < until_ts AND r.ts >= from_ts AND r.ts < until_ts
$$;
REVOKE ALL ON FUNCTION beaconflow.sightings_between(timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION beaconflow.sightings_between(timestamptz, timestamptz)
    TO beaconflow_reader, beaconflow_writer;

CREATE OR REPLACE VIEW beaconflow.telemetry AS
    SELECT ts, beacon_id, battery_mv, temperature_c, adv_count, uptime_s, site_id, agent_id
    FROM beaconflow.telemetry_raw;

CREATE OR REPLACE VIEW beaconflow.beacons AS
    SELECT coalesce(s.beacon_id, r.beacon_id) AS beacon_id, s.site_id, r.label,
           CASE WHEN r.identity_key AND coalesce(s.beacon_id, r.beacon_id) NOT LIKE 'mac:%'
                     AND coalesce(s.beacon_id, r.beacon_id) NOT LIKE 'anon:%'
                     AND coalesce(s.beacon_id, r.beacon_id) NOT LIKE 'eid:%' THEN 'eddystone-eid'
                ELSE coalesce(s.kind, CASE WHEN r.bthome_bindkey THEN 'bthome' END) END AS kind,
           s.first_seen, s.last_seen,
           CASE WHEN coalesce(s.beacon_id, r.beacon_id) LIKE 'mac:%' THEN 'address'
                WHEN coalesce(s.beacon_id, r.beacon_id) LIKE 'anon:%' THEN 'pseudonym'
                WHEN coalesce(s.beacon_id, r.beacon_id) LIKE 'eid:%' THEN 'unresolved_eid'
                WHEN r.identity_key THEN 'resolved_eid'
                ELSE 'frame' END AS identity_source,
           s.address,
           CASE s.address_random WHEN true THEN 'random' WHEN false THEN 'public' END AS address_type,
           CASE WHEN s.advertising_event IS NULL THEN NULL
                WHEN s.advertising_event = 19 THEN 'adv_ind' WHEN s.advertising_event = 21 THEN 'adv_direct_ind'
                WHEN s.advertising_event = 18 THEN 'adv_scan_ind' WHEN s.advertising_event = 16 THEN 'adv_nonconn_ind'
                WHEN s.advertising_event IN (26, 27) THEN 'scan_rsp'
                ELSE 'ext' || CASE WHEN s.advertising_event & 1 <> 0 THEN '_connectable' ELSE '' END
                           || CASE WHEN s.advertising_event & 2 <> 0 THEN '_scannable' ELSE '' END
                           || CASE WHEN s.advertising_event & 4 <> 0 THEN '_directed' ELSE '' END
                           || CASE WHEN s.advertising_event & 8 <> 0 THEN '_scan_rsp' ELSE '' END
           END AS advertising_event,
           s.url
    FROM beaconflow.beacon_state s FULL JOIN beaconflow.beacon_registry r ON r.beacon_id = s.beacon_id;
