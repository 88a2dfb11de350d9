-- each ingest instance's own figures, for the console's pipeline page
--
-- An instance records, with the renewal of its leases (every quarter lease), how it is doing: its lag (from a
-- batch's arrival to its commit), the batches and sightings it committed a second over the last minute, the
-- batches it refused and those it committed in all, how many of its brokers it is connected to and whether it
-- is connected to the database. `ingest_status` shows them for every instance counted live, and how old they are.

ALTER TABLE beaconflow.ingest_instances ADD COLUMN status jsonb, ADD COLUMN status_at timestamptz;

CREATE FUNCTION beaconflow.set_instance_status(instance text, status jsonb) RETURNS void
    LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
    UPDATE beaconflow.ingest_instances SET status = $2, status_at = now() WHERE instance = $1 AND backend_pid = pg_backend_pid()
$$;
REVOKE ALL ON FUNCTION beaconflow.set_instance_status(text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION beaconflow.set_instance_status(text, jsonb) TO beaconflow_writer;

CREATE VIEW beaconflow.ingest_status AS
    SELECT i.instance, i.joined_at, i.status_at,
           (i.status->>'lag_s')::double precision AS lag_s,
           (i.status->>'batches_per_s')::double precision AS batches_per_s,
           (i.status->>'sightings_per_s')::double precision AS sightings_per_s,
           (i.status->>'batches_committed')::bigint AS batches_committed,
           (i.status->>'batches_rejected')::bigint AS batches_rejected,
           (i.status->>'brokers_connected')::integer AS brokers_connected,
           (i.status->>'brokers')::integer AS brokers,
           (i.status->>'database_connected')::boolean AS database_connected
    FROM beaconflow.ingest_instances i
    WHERE i.expires_at > now() AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = i.backend_pid);
GRANT SELECT ON beaconflow.ingest_status TO beaconflow_reader;
