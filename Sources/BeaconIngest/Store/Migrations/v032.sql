-- battery forecasts kept across restarts
--
-- What the ingest has learned of each beacon's battery (its trend's 4-hour means, its reboots of the week and its
-- charge counting: the counters' sums, the day points, the cell's hours and temperatures) is saved here once an
-- hour of the beacon's event time and at a swap, in the transaction of the batch that brought it, and read back
-- when an instance claims the beacon's site: a restarted ingest, or another one taking the site over, goes on
-- forecasting from it. `state` is the ingest's own byte layout (versioned); nothing here is meant for queries.

CREATE TABLE beaconflow.fleet_health_state (
    beacon_id text PRIMARY KEY REFERENCES beaconflow.beacon_state (beacon_id) ON DELETE CASCADE,
    site_id text NOT NULL,
    last_seen timestamptz NOT NULL,
    state bytea NOT NULL
);
CREATE INDEX fleet_health_state_site ON beaconflow.fleet_health_state (site_id);
GRANT SELECT, INSERT, UPDATE ON beaconflow.fleet_health_state TO beaconflow_writer;
