-- acknowledged progress per agent
--
-- What each agent has been told is committed (several ingest instances agree through this row), and the
-- message that goes with a rejection's reason.

ALTER TABLE beaconflow.agent_state ADD COLUMN committed_through bigint NOT NULL DEFAULT 0;
ALTER TABLE beaconflow.rejected_batches ADD COLUMN detail text;
CREATE INDEX ON beaconflow.rejected_batches (received_at);
