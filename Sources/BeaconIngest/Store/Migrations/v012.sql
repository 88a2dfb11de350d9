-- how each beacon was last heard: address, address type, advertising event, URL
--
-- How each beacon was last heard: its device address and address type, the advertising event of its latest
-- sighting (the five event-type bits of the wire format, named in the view), and the URL of its Eddystone-URL
-- frames.

ALTER TABLE beaconflow.beacon_state
    ADD COLUMN address macaddr,
    ADD COLUMN address_random boolean,
    ADD COLUMN advertising_event smallint,
    ADD COLUMN url text;

CREATE OR REPLACE VIEW beaconflow.beacons AS
    SELECT coalesce(s.beacon_id, r.beacon_id) AS beacon_id, s.site_id, r.label,
           coalesce(s.kind, CASE WHEN r.bthome_bindkey THEN 'bthome' END) AS kind,
           s.first_seen, s.last_seen,
           CASE WHEN coalesce(s.beacon_id, r.beacon_id) LIKE 'mac:%' THEN 'address'
                WHEN coalesce(s.beacon_id, r.beacon_id) LIKE 'anon:%' THEN 'pseudonym'
                WHEN coalesce(s.beacon_id, r.beacon_id) LIKE 'eid:%' THEN 'unresolved_eid'
                WHEN r.identity_key THEN 'resolved_eid'
                ELSE 'frame' END AS identity_source,
           s.address,
           CASE s.address_random WHEN true THEN 'random' WHEN false THEN 'public' END AS address_type,
           CASE WHEN s.advertising_event IS NULL THEN NULL
                WHEN s.advertising_event = 19 THEN 'adv_ind' WHEN s.advertising_event = 21 THEN 'adv_direct_ind'
                WHEN s.advertising_event = 18 THEN 'adv_scan_ind' WHEN s.advertising_event = 16 THEN 'adv_nonconn_ind'
                WHEN s.advertising_event IN (26, 27) THEN 'scan_rsp'
                ELSE 'ext' || CASE WHEN s.advertising_event & 1 <> 0 THEN '_connectable' ELSE '' END
                           || CASE WHEN s.advertising_event & 2 <> 0 THEN '_scannable' ELSE '' END
                           || CASE WHEN s.advertising_event & 4 <> 0 THEN '_directed' ELSE '' END
                           || CASE WHEN s.advertising_event & 8 <> 0 THEN '_scan_rsp' ELSE '' END
           END AS advertising_event,
           s.url
    FROM beaconflow.beacon_state s FULL JOIN beaconflow.beacon_registry r ON r.beacon_id = s.beacon_id;
