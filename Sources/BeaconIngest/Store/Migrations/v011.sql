-- site leases only the ingest's role can take; content digests; progress and partitions bounded
--
-- Sites are served under leases rather than advisory locks (which any login may take): a claim is a row of
-- `site_claims` with an epoch and an expiry, renewed by its holder every quarter of the lease, and taken over
-- by another instance once it has expired or its holder's session is gone. Only these SECURITY DEFINER
-- functions write the claims and the live instances, and only the writer role may call them. A commit holds
-- its sites' claims (a row lock, `hold_sites`) until it ends, so a claim never moves under a transaction
-- that writes for its site; a frozen holder's lock is ended by its session's idle-in-transaction timeout.
-- Rejected batches are pruned only through `prune_rejections`, never deleted by the writer directly. A batch
-- records the digest of its content (`DecodedBatch.contentDigest`), so that a batch sent again is told from
-- another batch under the same sequence by what it says, not only by its metadata.

ALTER TABLE beaconflow.batches ADD COLUMN content_digest bigint;

CREATE TABLE beaconflow.ingest_instances (
    instance text PRIMARY KEY,
    backend_pid integer NOT NULL,
    joined_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
ALTER TABLE beaconflow.site_claims
    ADD COLUMN epoch bigint NOT NULL DEFAULT 0,
    ADD COLUMN expires_at timestamptz NOT NULL DEFAULT '-infinity';
REVOKE INSERT, UPDATE, DELETE ON beaconflow.site_claims, beaconflow.ingest_instances FROM beaconflow_writer;
GRANT SELECT ON beaconflow.site_claims, beaconflow.ingest_instances TO beaconflow_writer;

-- A lease is held while it has not expired and its holder's session lives (a session that ended, with its
-- process or its connection, holds nothing; a pid reused meanwhile only makes the lease wait its expiry).
CREATE FUNCTION beaconflow.lease_held(expires_at timestamptz, backend_pid integer) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog AS $$
    SELECT $1 > now() AND EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a WHERE a.pid = $2)
$$;

CREATE FUNCTION beaconflow.check_lease_seconds(seconds double precision) RETURNS interval
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog AS $$
BEGIN
    IF seconds IS NULL OR seconds < 1 OR seconds > 300 THEN
        RAISE EXCEPTION 'a lease lasts 1 to 300 seconds, not %', seconds USING ERRCODE = '22023';
    END IF;
    RETURN seconds * interval '1 second';
END
$$;

-- Counts this session's instance among the live ones for the lease's time (again at each renewal).
CREATE FUNCTION beaconflow.join_instances(instance text, lease_seconds double precision) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
    INSERT INTO beaconflow.ingest_instances (instance, backend_pid, joined_at, expires_at)
    VALUES ($1, pg_backend_pid(), now(), now() + beaconflow.check_lease_seconds($2))
    ON CONFLICT (instance) DO UPDATE SET backend_pid = excluded.backend_pid, expires_at = excluded.expires_at,
        joined_at = CASE WHEN ingest_instances.backend_pid = excluded.backend_pid
                         THEN ingest_instances.joined_at ELSE excluded.joined_at END
$$;

CREATE FUNCTION beaconflow.leave_instances(instance text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
    DELETE FROM beaconflow.ingest_instances WHERE instance = $1 AND backend_pid = pg_backend_pid()
$$;

-- Claims a site nobody holds: returns the claim's new epoch and the instance that held it before (null when
-- none did), or no row when it is held, or when its claim is locked by a transaction in progress.
CREATE FUNCTION beaconflow.claim_site(site text, instance text, lease_seconds double precision)
RETURNS TABLE (epoch bigint, previous text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog SET lock_timeout = '500ms' AS $$
DECLARE
    held_by text;
    held_until timestamptz;
    held_in integer;
BEGIN
    SELECT c.instance, c.expires_at, c.backend_pid INTO held_by, held_until, held_in
    FROM beaconflow.site_claims c WHERE c.site_id = claim_site.site FOR UPDATE;
    IF FOUND AND beaconflow.lease_held(held_until, held_in) THEN
        RETURN;
    END IF;
    RETURN QUERY
        INSERT INTO beaconflow.site_claims AS c (site_id, instance, claimed_at, backend_pid, epoch, expires_at)
        VALUES (claim_site.site, claim_site.instance, now(), pg_backend_pid(), 1,
                now() + beaconflow.check_lease_seconds(lease_seconds))
        ON CONFLICT (site_id) DO UPDATE SET instance = excluded.instance, claimed_at = excluded.claimed_at,
            backend_pid = excluded.backend_pid, epoch = c.epoch + 1, expires_at = excluded.expires_at
            -- another session may have claimed it since the look above
            WHERE NOT beaconflow.lease_held(c.expires_at, c.backend_pid)
        RETURNING c.epoch, held_by;
EXCEPTION WHEN lock_not_available THEN
    RETURN;
END
$$;

-- Renews this instance's claims (those still of the epochs given) and its place among the live instances;
-- returns the sites renewed: a site missing from the answer has been taken over.
CREATE FUNCTION beaconflow.renew_sites(instance text, sites text[], epochs bigint[], lease_seconds double precision)
RETURNS SETOF text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
    PERFORM beaconflow.join_instances(instance, lease_seconds);
    RETURN QUERY
        UPDATE beaconflow.site_claims c
        SET expires_at = now() + beaconflow.check_lease_seconds(lease_seconds), backend_pid = pg_backend_pid()
        FROM unnest(sites, epochs) AS h(site_id, epoch)
        WHERE c.site_id = h.site_id AND c.epoch = h.epoch AND c.instance = renew_sites.instance
        RETURNING c.site_id;
END
$$;

-- In a transaction that writes for these sites: locks their claims (those still of the epochs given) until
-- it ends, so that no other instance takes them meanwhile; returns the sites held.
CREATE FUNCTION beaconflow.hold_sites(instance text, sites text[], epochs bigint[]) RETURNS SETOF text
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
    SELECT c.site_id FROM beaconflow.site_claims c JOIN unnest($2, $3) AS h(site_id, epoch)
        ON c.site_id = h.site_id AND c.epoch = h.epoch
    WHERE c.instance = $1
    FOR SHARE OF c
$$;

-- Hands a site over at once: its lease ends now.
CREATE FUNCTION beaconflow.release_site(instance text, site text, epoch bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
    UPDATE beaconflow.site_claims SET expires_at = '-infinity'
    WHERE site_id = $2 AND instance = $1 AND site_claims.epoch = $3
$$;

CREATE FUNCTION beaconflow.prune_rejections() RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
    WITH pruned AS (
        DELETE FROM beaconflow.rejected_batches
        WHERE received_at < now() - (SELECT value::integer FROM beaconflow.settings WHERE key = 'retention_days')
                                    * interval '1 day'
        RETURNING 1)
    SELECT count(*) FROM pruned
$$;
REVOKE DELETE ON beaconflow.rejected_batches FROM beaconflow_writer;

DO $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY[
        'lease_held(timestamptz, integer)', 'check_lease_seconds(double precision)',
        'join_instances(text, double precision)', 'leave_instances(text)',
        'claim_site(text, text, double precision)', 'renew_sites(text, text[], bigint[], double precision)',
        'hold_sites(text, text[], bigint[])', 'release_site(text, text, bigint)', 'prune_rejections()']
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION beaconflow.%s FROM PUBLIC', name);
        EXECUTE format('GRANT EXECUTE ON FUNCTION beaconflow.%s TO beaconflow_writer', name);
    END LOOP;
END
$$;

-- An agent's acknowledged progress only grows, to at most a sequence committed or refused for it: a login
-- that raised it would have the ingest acknowledge (and the agent delete) batches never stored.
ALTER TABLE beaconflow.rejected_batches ADD COLUMN site_id text, ADD COLUMN agent_id text, ADD COLUMN sequence bigint;
CREATE INDEX rejected_batches_agent ON beaconflow.rejected_batches (site_id, agent_id, sequence);
ALTER TABLE beaconflow.agent_state ADD CONSTRAINT committed_through_in_range
    CHECK (committed_through BETWEEN 0 AND 4611686018427387904) NOT VALID;
CREATE FUNCTION beaconflow.check_progress() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
    before bigint := CASE WHEN TG_OP = 'UPDATE' THEN OLD.committed_through ELSE 0 END;
BEGIN
    IF NEW.committed_through < before THEN
        RAISE EXCEPTION 'committed_through of %/% may not go back from % to %', NEW.site_id, NEW.agent_id,
            before, NEW.committed_through USING ERRCODE = '23514';
    END IF;
    IF NEW.committed_through > before AND NOT EXISTS (
        SELECT 1 FROM beaconflow.batches b
        WHERE b.site_id = NEW.site_id AND b.agent_id = NEW.agent_id AND b.sequence >= NEW.committed_through
        UNION ALL
        SELECT 1 FROM beaconflow.rejected_batches r
        WHERE r.site_id = NEW.site_id AND r.agent_id = NEW.agent_id AND r.sequence >= NEW.committed_through)
    THEN
        RAISE EXCEPTION 'committed_through % of %/% is beyond every batch committed or refused for it',
            NEW.committed_through, NEW.site_id, NEW.agent_id USING ERRCODE = '23514';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER progress_only_as_far_as_stored BEFORE INSERT OR UPDATE OF committed_through ON beaconflow.agent_state
    FOR EACH ROW EXECUTE FUNCTION beaconflow.check_progress();

-- Partitions within a total (the owner's setting): the writer role cannot make them by the thousand.
INSERT INTO beaconflow.settings (key, value) VALUES ('partition_days_max', '1000');
ALTER FUNCTION beaconflow.ensure_partitions(date, integer) RENAME TO make_partitions;
REVOKE ALL ON FUNCTION beaconflow.make_partitions(date, integer) FROM PUBLIC, beaconflow_writer;
CREATE FUNCTION beaconflow.ensure_partitions(first_day date, days integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
    allowed integer;
    existing integer;
    missing integer := 0;
BEGIN
    SELECT value::integer INTO allowed FROM beaconflow.settings WHERE key = 'partition_days_max';
    SELECT count(*) INTO existing FROM pg_catalog.pg_inherits WHERE inhparent = 'beaconflow.sighting_packs'::regclass;
    IF days BETWEEN 1 AND 62 AND first_day BETWEEN date '2000-01-01' AND date '2200-01-01' THEN
        SELECT count(*) INTO missing FROM generate_series(0, days - 1) AS d
        WHERE to_regclass(format('beaconflow.sighting_packs_%s', to_char(first_day + d, 'YYYYMMDD'))) IS NULL;
    END IF;
    IF existing + missing > allowed THEN
        RAISE EXCEPTION 'ensure_partitions: % days have partitions, and % more would pass partition_days_max, %',
            existing, missing, allowed USING ERRCODE = '54000';
    END IF;
    RETURN beaconflow.make_partitions(first_day, days);
END
$$;
REVOKE ALL ON FUNCTION beaconflow.ensure_partitions(date, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION beaconflow.ensure_partitions(date, integer) TO beaconflow_writer;

CREATE OR REPLACE VIEW beaconflow.site_owners AS
    SELECT c.site_id, c.instance, c.claimed_at AS since, c.expires_at AS lease_expires
    FROM beaconflow.site_claims c
    WHERE c.expires_at > now() AND EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a WHERE a.pid = c.backend_pid);
