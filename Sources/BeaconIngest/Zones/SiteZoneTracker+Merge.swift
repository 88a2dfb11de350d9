extension SiteZoneTracker {
    /// The address beacon `addressBeaconID` was `beaconID`'s transmissions (`AddressMerge`): the address beacon's
    /// state, its readings not applied yet and its presence in the minutes not counted yet become `beaconID`'s. A
    /// state `beaconID` had here (heard from its previous address) ends first as if the beacon had left, its visit
    /// closed when it was last heard; its live zone is then the address beacon's (the database files the address
    /// beacon's stored visits, live zone and positions under `beaconID` in the same transaction). Returns the
    /// changes of that ending, and the merge itself (`ZoneChange.merged`).
    public mutating func merge(beacon addressBeaconID: String, into beaconID: String) -> [ZoneChange] {
        var changes: [ZoneChange] = []
        if beacons[addressBeaconID] != nil, var previous = beacons[beaconID] {
            keepPositions(of: beaconID, &previous, into: &changes)
            if !storesLiveHistory { endPath(of: beaconID, &previous, into: &changes) }
            leave(beaconID, previous, into: &changes)
            beacons[beaconID] = nil
            // The live zone is the address beacon's, filed under the beacon's id by the database.
            changes.removeAll {
                if case .placement(_, beaconID, _, _) = $0 { return true }
                return false
            }
        }
        if let state = beacons[addressBeaconID] {
            beacons[addressBeaconID] = nil
            beacons[beaconID] = state
            changes.append(.merged(site: site, addressBeaconID: addressBeaconID, beaconID: beaconID))
        }
        eventTime.rename(addressBeaconID, to: beaconID)
        for (minute, perZone) in presence {
            presence[minute] = perZone.map { zone in
                guard let seconds = zone[addressBeaconID] else { return zone }
                var merged = zone
                merged[addressBeaconID] = nil
                // One beacon is present at most the whole minute, however many ids it was heard under.
                merged[beaconID] = min(Self.minute, (zone[beaconID] ?? 0) + seconds)
                return merged
            }
        }
        return changes
    }
}
