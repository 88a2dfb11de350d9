-- frames waiting for their address's identity
--
-- Eddystone URL, TLM and eTLM frames from a device address that no receiver of the site has tied to an identity
-- yet wait seconds (docs/proximity-and-occupancy.md) for an identity frame from the same address. The instance
-- serving the site keeps each waiting frame here, in the transaction of the batch that brought it, and deletes it in the
-- transaction that stores its rows (as the identity's, or under its address once the wait is over): an instance
-- that restarts, or takes the site over, takes them back from here. `frame` is the sighting as a batch of one
-- (docs/wire-format.md), its time the event time; `ts` is the same time, in microseconds.

CREATE TABLE beaconflow.waiting_frames (
    site_id text NOT NULL,
    agent_id text NOT NULL,
    address bigint NOT NULL,
    ts bigint NOT NULL,
    frame bytea NOT NULL,
    PRIMARY KEY (site_id, agent_id, address, ts)
);
GRANT SELECT, INSERT, DELETE ON beaconflow.waiting_frames TO beaconflow_writer;
