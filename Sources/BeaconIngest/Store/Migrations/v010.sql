-- which ingest instance serves each site
--
-- Each site's claim by the ingest instance serving it. An instance serves a site while its PostgreSQL session
-- holds the site's advisory lock (class 'bfst', key `hashtext(site_id)`: `BatchWriter.siteLockClass`), and records
-- its claim here in that session; `site_owners` shows the claims whose lock is held now, so a claim left by
-- an instance that died disappears from the view with its session.

CREATE TABLE beaconflow.site_claims (
    site_id text PRIMARY KEY,
    instance text NOT NULL,
    claimed_at timestamptz NOT NULL,
    backend_pid integer NOT NULL
);
GRANT SELECT, INSERT, UPDATE ON beaconflow.site_claims TO beaconflow_writer;
REVOKE DELETE ON beaconflow.site_claims FROM beaconflow_writer;

CREATE VIEW beaconflow.site_owners AS
    SELECT c.site_id, c.instance, c.claimed_at AS since
    FROM beaconflow.site_claims c
    WHERE EXISTS (
        SELECT 1 FROM pg_catalog.pg_locks l
        WHERE l.locktype = 'advisory' AND l.granted AND l.pid = c.backend_pid AND l.objsubid = 2
          AND l.classid = 1650881396::oid AND l.objid = hashtext(c.site_id)::oid);

GRANT SELECT ON beaconflow.site_owners TO beaconflow_reader;
