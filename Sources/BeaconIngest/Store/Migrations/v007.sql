-- zone checkpoints; the writer appends raw rows only
--
-- Each site's zone state as of its watermark, saved in the transaction that counted its minutes: a restarted
-- ingest resumes from it and reads back the sightings stored after it. The writer role appends raw rows and
-- never changes or deletes them (nor those of the partitions made from now on: default privileges for both
-- the role migrating and the owner of the partition function); it keeps UPDATE where it upserts.

CREATE TABLE beaconflow.zone_checkpoints (
    site_id text PRIMARY KEY,
    watermark timestamptz NOT NULL,
    saved_at timestamptz NOT NULL DEFAULT now(),
    state bytea NOT NULL
);
GRANT SELECT, INSERT, UPDATE ON beaconflow.zone_checkpoints TO beaconflow_writer;
REVOKE DELETE ON beaconflow.zone_checkpoints FROM beaconflow_writer;

REVOKE UPDATE, DELETE ON beaconflow.sightings_raw, beaconflow.telemetry_raw, beaconflow.batches FROM beaconflow_writer;
REVOKE DELETE ON beaconflow.visits_raw, beaconflow.zone_occupancy_minute, beaconflow.agent_state,
    beaconflow.beacon_state FROM beaconflow_writer;
DO $$
DECLARE
    partition regclass;
    owner name := (SELECT pg_get_userbyid(proowner) FROM pg_proc
                   WHERE oid = 'beaconflow.ensure_partitions(date, integer)'::regprocedure);
BEGIN
    FOR partition IN
        SELECT inhrelid::regclass FROM pg_inherits
        WHERE inhparent IN ('beaconflow.sightings_raw'::regclass, 'beaconflow.telemetry_raw'::regclass)
    LOOP
        EXECUTE format('REVOKE UPDATE, DELETE ON %s FROM beaconflow_writer', partition);
    END LOOP;
    IF pg_has_role(owner, 'MEMBER') THEN
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA beaconflow REVOKE UPDATE, DELETE ON TABLES FROM beaconflow_writer', owner);
    END IF;
END
$$;
ALTER DEFAULT PRIVILEGES IN SCHEMA beaconflow REVOKE UPDATE, DELETE ON TABLES FROM beaconflow_writer;
