-- occupancy by majority of the minute, with occupant seconds
--
-- A beacon counts in the zone where it spent at least half of the minute (so in one zone at most), and
-- `occupant_seconds` sums every beacon's seconds of presence in the zone, so the average occupancy of any
-- period is exact: the hourly rollup's `avg_occupants` is its seconds over the hour's counted seconds. Minutes
-- counted before this version have no seconds (null); the rollup takes their count for the whole minute.

ALTER TABLE beaconflow.zone_occupancy_minute ADD COLUMN occupant_seconds double precision;

CREATE OR REPLACE VIEW beaconflow.zone_occupancy AS
    SELECT site_id, zone_id, bucket, occupants, occupant_seconds
    FROM beaconflow.zone_occupancy_minute;

CREATE OR REPLACE VIEW beaconflow.zone_occupancy_hourly AS
    WITH hours AS (
        SELECT site_id, zone_id, date_trunc('hour', bucket) AS bucket,
               sum(coalesce(occupant_seconds, occupants * 60.0)) / (60.0 * count(*)) AS avg_occupants,
               max(occupants) AS peak_occupants
        FROM beaconflow.zone_occupancy_minute
        GROUP BY 1, 2, 3
    )
    SELECT h.site_id, h.zone_id, h.bucket, h.avg_occupants::double precision AS avg_occupants, h.peak_occupants,
           (SELECT count(*) FROM beaconflow.visits_raw v
            WHERE v.site_id = h.site_id AND v.zone_id = h.zone_id
              AND v.enter_ts >= h.bucket AND v.enter_ts < h.bucket + interval '1 hour') AS visits
    FROM hours h;
