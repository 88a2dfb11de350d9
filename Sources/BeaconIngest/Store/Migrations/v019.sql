-- TLM readings from telemetry: each TLM transmission stored once, in telemetry_raw
--
-- Every TLM and eTLM transmission was stored twice: a row of `telemetry_raw`, and four rows of
-- `sensor_readings_raw` (battery_voltage, temperature, advertising_count, uptime) carrying the same values with
-- the same time, site and agent; on a site of TLM beacons those rows were most of the sensor readings' bytes.
-- `sensor_readings` now shows a TLM transmission's readings from its `telemetry_raw` row (a quantity the beacon
-- does not report, such as a temperature of 0x8000, has no row, as before); the ingest no longer writes them to
-- `sensor_readings_raw`, and the rows written before are removed here, each only where the telemetry row of the
-- same transmission (beacon, time, site, agent, count and uptime) stands in for it.

CREATE OR REPLACE VIEW beaconflow.sensor_readings AS
    SELECT ts, site_id, agent_id, beacon_id, quantity, value, unit
    FROM beaconflow.sensor_readings_raw
    UNION ALL
    SELECT t.ts, t.site_id, t.agent_id, t.beacon_id, q.quantity, q.value, q.unit
    FROM beaconflow.telemetry_raw t
    CROSS JOIN LATERAL (VALUES ('battery_voltage', t.battery_mv::double precision, 'millivolt'),
                               ('temperature', t.temperature_c::double precision, 'celsius'),
                               ('advertising_count', t.adv_count::double precision, 'count'),
                               ('uptime', t.uptime_s, 'second')) AS q(quantity, value, unit)
    WHERE t.site_id IS NOT NULL AND t.agent_id IS NOT NULL AND q.value IS NOT NULL;

WITH transmissions AS (
    SELECT c.beacon_id, c.ts, c.site_id, c.agent_id, c.frame_hash
    FROM beaconflow.sensor_readings_raw c
    JOIN beaconflow.sensor_readings_raw u
      ON u.beacon_id = c.beacon_id AND u.ts = c.ts AND u.agent_id = c.agent_id AND u.frame_hash = c.frame_hash
         AND u.quantity = 'uptime' AND u.unit = 'second'
    JOIN beaconflow.telemetry_raw t
      ON t.beacon_id = c.beacon_id AND t.ts = c.ts AND t.site_id = c.site_id AND t.agent_id = c.agent_id
         AND t.adv_count::double precision = c.value AND t.uptime_s = u.value
    WHERE c.quantity = 'advertising_count' AND c.unit = 'count'
)
DELETE FROM beaconflow.sensor_readings_raw r
USING transmissions x
WHERE r.beacon_id = x.beacon_id AND r.ts = x.ts AND r.agent_id = x.agent_id AND r.frame_hash = x.frame_hash
  AND r.quantity IN ('battery_voltage', 'temperature', 'advertising_count', 'uptime');
