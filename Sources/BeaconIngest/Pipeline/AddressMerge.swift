/// An address beacon (`mac:`) found to be a beacon with an identity: the frames of an address that waited in vain
/// for its identity (`AddressWait`) were stored under the address, and then an identity frame came from the same
/// address within its lifetime. Everything stored under the address at the site becomes the beacon's, in the
/// transaction of the batch that brought the identity (`merge_address_beacon`); the pipeline's own state is merged
/// at once (`IngestPipeline.mergeAddressBeacon`).
public struct AddressMerge: Sendable, Equatable {
    public var site: String
    /// The address beacon's id (`mac:...`).
    public var addressBeaconID: String
    public var beaconID: String
}

extension PipelineOutput {
    /// Files the rows of `merge.addressBeaconID` at its site under `merge.beaconID`.
    mutating func rename(_ merge: AddressMerge) {
        let from = merge.addressBeaconID
        let to = merge.beaconID
        for index in sightings.indices where sightings[index].beaconID == from && sightings[index].source.siteID == merge.site {
            sightings[index].beaconID = to
        }
        for index in telemetry.indices where telemetry[index].row.beaconID == from && telemetry[index].row.siteID == merge.site {
            telemetry[index].row.beaconID = to
        }
        for index in sensorReadings.indices where sensorReadings[index].beaconID == from && sensorReadings[index].siteID == merge.site {
            sensorReadings[index].beaconID = to
        }
        for index in deviceInfo.indices where deviceInfo[index].beaconID == from { deviceInfo[index].beaconID = to }
        zoneChanges = zoneChanges.map { $0.site == merge.site ? $0.renaming(from, to: to) : $0 }
    }
}

extension ZoneChange {
    /// The same change of the beacon `to` where it was of `from`.
    func renaming(_ from: String, to: String) -> ZoneChange {
        switch self {
        case .placement(let site, from, let zone, let since): .placement(site: site, beaconID: to, zone: zone, sinceMicros: since)
        case .visitOpened(let site, let zone, from, let enter): .visitOpened(site: site, zone: zone, beaconID: to, enterMicros: enter)
        case .visitClosed(let site, from, let enter, let exit): .visitClosed(site: site, beaconID: to, enterMicros: enter, exitMicros: exit)
        case .position(let site, from, let position): .position(site: site, beaconID: to, position: position)
        case .positionMinute(let site, from, let minute, let positions):
            .positionMinute(site: site, beaconID: to, minuteMicros: minute, positions: positions)
        default: self
        }
    }
}

extension IngestPipeline {
    /// An identity frame of `beacon` came from `address` at `site`: if the address's frames were stored under it
    /// within its lifetime, the address beacon becomes `beacon` here and in the database, once. Called before the
    /// identity's own sighting is recorded, so that the address beacon's state is taken where `beacon` has none.
    /// Returns the merge, if there was one (the caller renames the readings it holds for the tracker).
    @discardableResult
    mutating func mergeAddressBeacon(
        site: String, address: UInt64, into beacon: ResolvedBeacon, timeMicros: Int64, output: inout PipelineOutput
    ) -> AddressMerge? {
        guard waiting.storesUnderAddress(site: site), let addressBeacon = waiting.tied(site: site, address: address, timeMicros: timeMicros, lifetimeMicros: addressLifetimeMicros),
            addressBeacon != beacon.id
        else { return nil }
        let merge = AddressMerge(site: site, addressBeaconID: addressBeacon, beaconID: beacon.id)
        output.rename(merge)
        output.addressMerges.append(merge)
        health.merge(addressBeacon, into: beacon)
        telemetry.merge(addressBeacon, into: beacon.id)
        if let changes = zoneTrackers[site]?.merge(beacon: addressBeacon, into: beacon.id) { output.zoneChanges += changes }
        return merge
    }

    /// Address beacons of sites just claimed that were stored within their address's lifetime (by an earlier
    /// owner, or by this instance before a restart): an identity heard from their address still merges them.
    public mutating func restoreAddressBeacons(_ beacons: [(site: String, address: UInt64, beaconID: String, lastSeenMicros: Int64)]) {
        waiting.rememberStoredUnderAddress(
            beacons.map { ($0.site, $0.address, AddressWait.StoredUnderAddress(timeMicros: $0.lastSeenMicros, beaconID: $0.beaconID)) })
    }
}
