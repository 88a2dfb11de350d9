-- silent agents
--
-- An agent online for `silent_after_minutes` without a batch is flagged in `agent_health.last_error` (the
-- view's columns are a contract, so the flag is a `silent: ...` message ahead of any error of the agent's).

ALTER TABLE beaconflow.agent_state ADD COLUMN online_since timestamptz;
UPDATE beaconflow.agent_state SET online_since = now() WHERE online;
INSERT INTO beaconflow.settings (key, value) VALUES ('silent_after_minutes', '5');

CREATE OR REPLACE VIEW beaconflow.agent_health AS
    SELECT a.site_id, a.agent_id, a.online, a.last_batch_at, a.adverts_per_s, a.spool_bytes, a.clock_offset_ms,
           CASE WHEN a.online AND greatest(a.last_batch_at, a.online_since) < now() - s.minutes * interval '1 minute'
                THEN concat_ws('; ', 'silent: online but no adverts since '
                         || to_char(greatest(a.last_batch_at, a.online_since) AT TIME ZONE 'UTC',
                                    'YYYY-MM-DD"T"HH24:MI:SS"Z"'), a.last_error)
                ELSE a.last_error END AS last_error
    FROM beaconflow.agent_state a,
         (SELECT value::integer AS minutes FROM beaconflow.settings WHERE key = 'silent_after_minutes') s;
