-- which sites file each ingest instance runs with
--
-- Instances sharing sites should run with the same sites file; each records a digest of its own (at start and at
-- each reload), so that an instance sees when another differs and says so (`beaconflow_ingest_sites_file_differs`).

ALTER TABLE beaconflow.ingest_instances ADD COLUMN sites_digest text;

-- Records the digest of this session's instance's sites file (only its own row, as the ingest's role may not
-- write the table).
CREATE FUNCTION beaconflow.set_sites_digest(instance text, digest text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
    UPDATE beaconflow.ingest_instances SET sites_digest = $2 WHERE instance = $1 AND backend_pid = pg_backend_pid()
$$;
REVOKE ALL ON FUNCTION beaconflow.set_sites_digest(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION beaconflow.set_sites_digest(text, text) TO beaconflow_writer;
