-- a commit holds its sites' claims with KEY SHARE, which renewals on the leases' own session pass
--
-- Leases are renewed on a session of their own (not the writer's), so that a long commit, a claim's read-back or a
-- slow statement never makes an instance lose a site it serves. The writer's transaction holds each claim it writes
-- for with FOR KEY SHARE: a renewal's UPDATE (of non-key columns, FOR NO KEY UPDATE) is not held up by it, while a
-- claim by another instance (`claim_site` reads the claim FOR UPDATE) still waits for the transaction to end.

CREATE OR REPLACE FUNCTION beaconflow.hold_sites(instance text, sites text[], epochs bigint[]) RETURNS SETOF text
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
    SELECT c.site_id FROM beaconflow.site_claims c JOIN unnest($2, $3) AS h(site_id, epoch)
        ON c.site_id = h.site_id AND c.epoch = h.epoch
    WHERE c.instance = $1
    FOR KEY SHARE OF c
$$;
