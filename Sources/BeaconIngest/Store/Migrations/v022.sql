-- Acknowledged batches folded into ranges
--
-- `batches` kept one row per committed batch for ever: on a busy site one row per agent per second, about a
-- ninth of what a sighting costs at rest once its minute is compacted. A batch only needs its own row while a
-- redelivery could still tell it from a reused sequence by its seal time, count and content. Once it is
-- acknowledged (at or below its agent's `committed_through`) and older than `compaction_lag_minutes`, the ingest
-- serving its site folds it, with the batches around it, into `batch_ranges`: one row per run of consecutive
-- sequences of one agent and boot id. A sequence is either in `batches` or in a range, never both, so a batch
-- sent again after its fold still counts once; a batch with another boot id is still told from a redelivery.

CREATE TABLE beaconflow.batch_ranges (
    site_id text NOT NULL,
    agent_id text NOT NULL,
    boot_id bigint NOT NULL,
    first_sequence bigint NOT NULL,
    last_sequence bigint NOT NULL,
    sightings bigint NOT NULL,
    first_committed_at timestamptz NOT NULL,
    last_committed_at timestamptz NOT NULL,
    PRIMARY KEY (site_id, agent_id, last_sequence),
    CHECK (first_sequence <= last_sequence)
);
GRANT SELECT ON beaconflow.batch_ranges TO beaconflow_writer;

CREATE FUNCTION beaconflow.fold_batches(site text, until_ts timestamptz)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
    folded integer;
BEGIN
    IF site IS NULL OR until_ts IS NULL THEN
        RAISE EXCEPTION 'fold_batches: needs a site and a time, not % and %', site, until_ts USING ERRCODE = '22023';
    END IF;
    -- The instance writing the site holds its claim FOR SHARE for the whole of its transaction: a batch is
    -- checked against the ranges and inserted either before this fold or after it, never between.
    PERFORM 1 FROM beaconflow.site_claims c WHERE c.site_id = site FOR UPDATE;
    PERFORM pg_advisory_xact_lock(1650877298, hashtext(site));  -- 'bfcr'
    WITH gone AS (
        DELETE FROM beaconflow.batches b
        USING beaconflow.agent_state a
        WHERE b.site_id = site AND a.site_id = b.site_id AND a.agent_id = b.agent_id
          AND b.sequence <= a.committed_through AND b.committed_at < until_ts
        RETURNING b.agent_id, b.boot_id, b.sequence, b.sightings, b.committed_at
    ), runs AS (
        SELECT agent_id, boot_id, min(sequence) AS first_sequence, max(sequence) AS last_sequence,
               sum(sightings) AS sightings, min(committed_at) AS first_committed_at,
               max(committed_at) AS last_committed_at, count(*) AS batches
        FROM (SELECT *, sequence - row_number() OVER (PARTITION BY agent_id, boot_id ORDER BY sequence) AS run
              FROM gone) g
        GROUP BY agent_id, boot_id, run
    ), extended AS (
        -- A run right after a range of the same boot id lengthens it.
        UPDATE beaconflow.batch_ranges r
        SET last_sequence = u.last_sequence, sightings = r.sightings + u.sightings,
            last_committed_at = greatest(r.last_committed_at, u.last_committed_at)
        FROM runs u
        WHERE r.site_id = site AND r.agent_id = u.agent_id AND r.boot_id = u.boot_id
          AND r.last_sequence = u.first_sequence - 1
        RETURNING u.agent_id, u.first_sequence
    ), inserted AS (
        INSERT INTO beaconflow.batch_ranges (site_id, agent_id, boot_id, first_sequence, last_sequence, sightings,
                                             first_committed_at, last_committed_at)
        SELECT site, u.agent_id, u.boot_id, u.first_sequence, u.last_sequence, u.sightings, u.first_committed_at,
               u.last_committed_at
        FROM runs u
        WHERE NOT EXISTS (SELECT 1 FROM extended e WHERE e.agent_id = u.agent_id AND e.first_sequence = u.first_sequence)
    )
    SELECT coalesce(sum(batches), 0) INTO folded FROM runs;
    RETURN folded;
END
$$;
REVOKE ALL ON FUNCTION beaconflow.fold_batches(text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION beaconflow.fold_batches(text, timestamptz) TO beaconflow_writer;

-- Progress may also rise to a sequence folded into a range.
CREATE OR REPLACE FUNCTION beaconflow.check_progress() RETURNS trigger
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
        SELECT 1 FROM beaconflow.batch_ranges g
        WHERE g.site_id = NEW.site_id AND g.agent_id = NEW.agent_id AND g.last_sequence >= NEW.committed_through
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
