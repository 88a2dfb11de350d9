-- where each beacon is now; which agents each site waits for
--
-- Where each beacon is now, and which agents each site's zone decisions wait for: the sites file's sites and
-- zones (as the ingest last started with them), each agent's state in its site's zone tracking, and the views
-- over them.

CREATE TABLE beaconflow.site_registry (
    site_id text PRIMARY KEY,
    timezone text NOT NULL,
    absence_timeout_s double precision NOT NULL,
    allowed_lateness_s double precision NOT NULL
);
CREATE TABLE beaconflow.agent_zone_state (
    site_id text NOT NULL,
    agent_id text NOT NULL,
    zone_state text NOT NULL CHECK (zone_state IN ('awaited', 'live', 'holding', 'let_go')),
    since timestamptz NOT NULL,
    PRIMARY KEY (site_id, agent_id)
);
CREATE TABLE beaconflow.zone_registry (
    site_id text NOT NULL REFERENCES beaconflow.site_registry ON DELETE CASCADE,
    zone_id text NOT NULL,
    position integer NOT NULL,
    capacity integer,
    rect double precision[] CHECK (rect IS NULL OR cardinality(rect) = 4),
    PRIMARY KEY (site_id, zone_id)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON beaconflow.site_registry, beaconflow.zone_registry, beaconflow.agent_zone_state
    TO beaconflow_writer;

CREATE VIEW beaconflow.zones AS
    SELECT site_id, zone_id, capacity, rect[1] AS x0, rect[2] AS y0, rect[3] AS x1, rect[4] AS y1
    FROM beaconflow.zone_registry ORDER BY site_id, position;
GRANT SELECT ON beaconflow.zones TO beaconflow_reader;

CREATE OR REPLACE VIEW beaconflow.agent_health AS
    SELECT coalesce(a.site_id, z.site_id) AS site_id, coalesce(a.agent_id, z.agent_id) AS agent_id,
           coalesce(a.online, false) AS online, a.last_batch_at, a.adverts_per_s, a.spool_bytes,
           a.clock_offset_ms,
           CASE WHEN a.online AND greatest(a.last_batch_at, a.online_since) < now() - s.minutes * interval '1 minute'
                THEN concat_ws('; ', 'silent: online but no adverts since '
                         || to_char(greatest(a.last_batch_at, a.online_since) AT TIME ZONE 'UTC',
                                    'YYYY-MM-DD"T"HH24:MI:SS"Z"'), a.last_error)
                ELSE a.last_error END AS last_error,
           z.zone_state, z.since AS zone_state_since
    FROM beaconflow.agent_state a
         FULL JOIN beaconflow.agent_zone_state z ON z.site_id = a.site_id AND z.agent_id = a.agent_id
         CROSS JOIN (SELECT value::integer AS minutes FROM beaconflow.settings WHERE key = 'silent_after_minutes') s;

CREATE VIEW beaconflow.beacon_locations AS
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
             SELECT zone_id, enter_ts, exit_ts FROM beaconflow.visits_raw v
             WHERE v.site_id = s.site_id AND v.beacon_id = s.beacon_id
             ORDER BY v.enter_ts DESC LIMIT 1) v ON true;
GRANT SELECT ON beaconflow.beacon_locations TO beaconflow_reader;
