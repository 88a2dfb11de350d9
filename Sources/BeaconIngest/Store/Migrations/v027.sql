-- positions on a site's floor
--
-- Where a site has a floor (agents with `at`, zones with `rect`), its tracker follows each beacon's position.
-- `beacon_live_position` holds each beacon's latest (once every 10 s of event time while it is heard), written in
-- the transaction of the zone changes by the instance serving the site. `beacon_position_minutes` keeps the history:
-- one row a beacon-minute, its positions packed in a `smallint[]` of four values each (tenths of a second into the
-- minute, x, y and the error, in decimetres), written once the beacon's readings have passed the minute; deleted
-- after `retention_days` by `prune_positions`.

CREATE TABLE beaconflow.beacon_live_position (
    site_id text NOT NULL,
    beacon_id text NOT NULL,
    ts timestamptz NOT NULL,
    x real NOT NULL,
    y real NOT NULL,
    error_m real NOT NULL,
    zone_probabilities jsonb NOT NULL,
    PRIMARY KEY (site_id, beacon_id)
);
GRANT SELECT, INSERT, UPDATE ON beaconflow.beacon_live_position TO beaconflow_writer;

CREATE TABLE beaconflow.beacon_position_minutes (
    site_id text NOT NULL,
    beacon_id text NOT NULL,
    minute timestamptz NOT NULL,
    positions smallint[] NOT NULL,
    PRIMARY KEY (site_id, beacon_id, minute)
);
CREATE INDEX ON beaconflow.beacon_position_minutes USING brin (minute);
GRANT SELECT, INSERT, UPDATE ON beaconflow.beacon_position_minutes TO beaconflow_writer;

CREATE FUNCTION beaconflow.prune_positions() RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
    WITH pruned AS (
        DELETE FROM beaconflow.beacon_position_minutes
        WHERE minute < now() - (SELECT value::integer FROM beaconflow.settings WHERE key = 'retention_days')
                               * interval '1 day'
        RETURNING 1)
    SELECT count(*) FROM pruned
$$;
REVOKE ALL ON FUNCTION beaconflow.prune_positions() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION beaconflow.prune_positions() TO beaconflow_writer;

CREATE VIEW beaconflow.beacon_positions AS
    SELECT p.site_id, p.beacon_id, p.ts, p.x, p.y, p.error_m, p.zone_probabilities
    FROM beaconflow.beacon_live_position p;

CREATE VIEW beaconflow.beacon_position_history AS
    SELECT m.minute + (m.positions[i] / 10.0) * interval '1 second' AS ts, m.site_id, m.beacon_id,
           (m.positions[i + 1] / 10.0)::real AS x, (m.positions[i + 2] / 10.0)::real AS y,
           (m.positions[i + 3] / 10.0)::real AS error_m
    FROM beaconflow.beacon_position_minutes m,
         generate_series(1, coalesce(array_length(m.positions, 1), 0), 4) AS i;

GRANT SELECT ON beaconflow.beacon_positions, beaconflow.beacon_position_history TO beaconflow_reader;
