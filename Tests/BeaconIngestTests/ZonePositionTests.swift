import BeaconPositions
@testable import BeaconIngest
import Foundation
import Testing

/// Zones from positions where the site has a floor (`zone_scoring: position`): a walker is followed across an open
/// floor with no wall between its zones, and its positions are given live and kept per minute.
@Suite struct ZonePositionTests {
    let start: Int64 = 1_767_225_600_000_000  // a minute boundary
    let second: Int64 = 1_000_000
    /// An open floor of 20 × 8 m, two zones split at x = 10, a receiver in each corner; no agent is in a zone.
    let floorSites = """
        sites:
          - id: hall
            position_power_at_1m_dbm: -60
            position_path_loss_exponent: 2
            position_noise_db: 3
            zones: [{id: west, rect: [0, 0, 10, 8]}, {id: east, rect: [10, 0, 20, 8]}]
            agents:
              - {id: r1, at: [0, 0, 2.2]}
              - {id: r2, at: [20, 0, 2.2]}
              - {id: r3, at: [0, 8, 2.2]}
              - {id: r4, at: [20, 8, 2.2]}
        """

    /// What each receiver hears of a beacon at (x, y) under the site's model, with ±1.5 dB alternating.
    func readings(x: Double, y: Double, index: Int) -> [(agent: String, rssi: Double)] {
        let model = RadioModel(powerAt1mDbm: -60, exponent: 2, sigmaDb: 3)
        return [("r1", 0.0, 0.0), ("r2", 20, 0), ("r3", 0, 8), ("r4", 20, 8)].enumerated().map { number, receiver in
            let distance = ((x - receiver.1) * (x - receiver.1) + (y - receiver.2) * (y - receiver.2) + 1).squareRoot()
            return (receiver.0, model.expected(distance: distance) + ((index + number) % 2 == 0 ? 1.5 : -1.5))
        }
    }

    @Test func aSiteWithAFloorScoresZonesByPositionByDefault() throws {
        let site = try SitesConfiguration.parse(floorSites).sites[0]
        #expect(site.hasFloor && site.zoneRules.scoring == .position)
        #expect(site.radioModel == RadioModel(powerAt1mDbm: -60, exponent: 2, sigmaDb: 3))
        #expect(site.zoneRules.switchEvidenceDbSeconds == 60 && site.zoneRules.pathChangeDbSeconds == 100)
        // A floor whose doors say where its walls are keeps the learned patterns, unless told; its beacons still
        // get positions from the agents of its zones.
        let walled = try SitesConfiguration.parse(
            floorSites.replacingOccurrences(of: "    zones:", with: "    doors: [[west, east]]\n    zones:")
                .replacingOccurrences(of: "r1, at", with: "r1, zone: west, at").replacingOccurrences(of: "r2, at", with: "r2, zone: east, at")
                .replacingOccurrences(of: "r3, at", with: "r3, zone: west, at")
        ).sites[0]
        #expect(walled.floor == .walled && walled.zoneRules.scoring == .pattern && walled.zoneRules.switchEvidenceDbSeconds == 120)
        #expect(SiteZoneTracker(site: walled).floor != nil)
        // Two receivers placed are not a floor: zones by patterns, as before, and scoring by position is refused.
        let twoPlaced = floorSites.replacingOccurrences(of: "r3, at: [0, 8, 2.2]", with: "r3, zone: west")
            .replacingOccurrences(of: "r4, at: [20, 8, 2.2]", with: "r4, zone: east")
        let two = try SitesConfiguration.parse(twoPlaced).sites[0]
        #expect(!two.hasFloor && two.zoneRules.scoring == .pattern)
        #expect(throws: SitesError.self) {
            try SitesConfiguration.parse(twoPlaced.replacingOccurrences(of: "position_noise_db: 3", with: "position_noise_db: 3\n    zone_scoring: position"))
        }
    }

    /// A site's radio map is read from the file it names, beside the sites file; what cannot be used is named.
    @Test func aRadioMapIsReadBesideTheSitesFile() throws {
        let directory = NSTemporaryDirectory() + "radio-map-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let mapped = floorSites.replacingOccurrences(of: "position_noise_db: 3", with: "position_noise_db: 3\n    position_radio_map: map.csv")
        try mapped.write(toFile: directory + "/sites.yaml", atomically: true, encoding: .utf8)
        try "receiver,x_m,y_m,correction_db\nr1,5.0,4.0,3.5\n".write(toFile: directory + "/map.csv", atomically: true, encoding: .utf8)
        let loaded = try SitesConfiguration.load(path: directory + "/sites.yaml")
        #expect(loaded.sites[0].radioMap?.correction(receiver: "r1", x: 5.1, y: 3.9) == 3.5)
        // A changed map is a changed file, for a reload to see.
        try "receiver,x_m,y_m,correction_db\nr1,5.0,4.0,2.0\n".write(toFile: directory + "/map.csv", atomically: true, encoding: .utf8)
        #expect(try SitesConfiguration.load(path: directory + "/sites.yaml").digest != loaded.digest)
        for (map, message) in [
            ("receiver,x_m,y_m,correction_db\nr9,5.0,4.0,3.5\n", "'r9' is no agent of site 'hall'"),
            ("receiver,x_m,y_m,correction_db\nr1,five,4.0,3.5\n", "map.csv: line 2:"),
        ] {
            try map.write(toFile: directory + "/map.csv", atomically: true, encoding: .utf8)
            let error = #expect(throws: SitesError.self) { try SitesConfiguration.load(path: directory + "/sites.yaml") }
            #expect(error?.message.contains(message) == true, "\(String(describing: error))")
        }
        try FileManager.default.removeItem(atPath: directory + "/map.csv")
        let missing = #expect(throws: SitesError.self) { try SitesConfiguration.load(path: directory + "/sites.yaml") }
        #expect(missing?.message.contains("position_radio_map: cannot read \(directory)/map.csv") == true, "\(String(describing: missing))")
    }

    @Test func aWalkerIsFollowedAcrossAnOpenFloorAndItsPositionsAreGivenAndKept() throws {
        var tracker = SiteZoneTracker(site: try SitesConfiguration.parse(floorSites).sites[0])
        var changes: [ZoneChange] = []
        // 40 s at (4, 4) in the west, 12 s walking to (16, 4) at 1 m/s, 48 s there: a reading of each receiver
        // every half second.
        for index in 0..<200 {
            let time = start + Int64(index) * second / 2
            let seconds = Double(index) / 2
            let x = seconds < 40 ? 4 : min(16, 4 + (seconds - 40))
            for reading in readings(x: x, y: 4, index: index) {
                tracker.add(beaconID: "tag", agent: reading.agent, timeMicros: time, rssi: reading.rssi)
                tracker.agentProgressed(reading.agent, newestMicros: time, arrivalMicros: time)
            }
            changes += tracker.advance(nowMicros: time)
        }
        changes += tracker.finish()
        let placements = changes.compactMap { change -> (String?, Int64)? in
            if case .placement(_, "tag", let zone, let since) = change { (zone, since) } else { nil }
        }
        #expect(placements.map(\.0) == ["west", "east"], "\(placements)")
        // It crossed x = 10 at 46 s; the move is dated within a few seconds of it.
        let crossed = Double(placements[1].1 - start) / 1e6
        #expect(abs(crossed - 46) < 4, "\(crossed)")

        // A position every 10 s (the belief after each slot's readings), near where the beacon was then.
        let positions = changes.compactMap { change -> BeaconPosition? in
            if case .position(_, "tag", let position) = change { position } else { nil }
        }
        #expect(positions.count == 10, "\(positions.map(\.timeMicros))")
        for position in positions {
            let seconds = Double(position.timeMicros - start) / 1e6
            let x = seconds < 40 ? 4 : min(16, 4 + (seconds - 40))
            // Still: within half a metre; walking, a couple of metres behind at most. The spread stays near what a
            // walker may move in a second makes it (about 2.6 m).
            let tolerance = seconds > 40 && seconds < 52 ? 2.0 : 0.5
            #expect(abs(position.x - x) < tolerance && abs(position.y - 4) < tolerance, "\(seconds) s: \(position)")
            #expect(position.errorM > 1 && position.errorM < 3, "\(seconds) s: \(position)")
            #expect(abs(position.zoneShares.values.reduce(0, +) - 1) < 0.02)
        }
        #expect((positions.first?.zoneShares["west"] ?? 0) > 0.95 && (positions.last?.zoneShares["east"] ?? 0) > 0.95)
        // Kept per minute: the first minute's six, then the last 40 s's four, at the same moments as given live
        // but decided with the readings after them too and drawn onto the line of the seconds around them: nearer
        // where the beacon was while it stood still or walked straight (at the median), within a couple of metres
        // where it set off or stopped (the line reaching across the turn), and no wider than live (the last, with
        // nothing after it, as wide as live on the hindsight's coarser cells).
        let minutes = changes.compactMap { change -> (Int64, [BeaconPosition])? in
            if case .positionMinute(_, "tag", let minute, let kept) = change { (minute, kept) } else { nil }
        }
        #expect(minutes.map(\.0) == [start, start + 60 * second])
        let kept = minutes.flatMap(\.1)
        #expect(kept.map(\.timeMicros) == positions.map(\.timeMicros))
        func error(_ position: BeaconPosition) -> Double {
            let seconds = Double(position.timeMicros - start) / 1e6
            return abs(position.x - (seconds < 40 ? 4 : min(16, 4 + (seconds - 40))))
        }
        let keptErrors: [Double] = kept.map(error).sorted()
        let liveErrors: [Double] = positions.map(error).sorted()
        // (0.30 m against 0.37 m, the widest 1.98 m: while the live belief trails the walker, its readings move
        // the level it learns by a fraction of a decibel.)
        #expect(keptErrors[keptErrors.count / 2] < liveErrors[liveErrors.count / 2] - 0.07, "\(keptErrors) against \(liveErrors)")
        #expect(keptErrors.allSatisfy { $0 < 2.2 }, "\(keptErrors)")
        #expect(abs(try #require(tracker.beacons["tag"]).level.offsetDb) < 1)
        for (index, (smoothed, live)) in zip(kept, positions).enumerated() {
            let slack = index == kept.count - 1 ? 0.05 : 1e-6
            #expect(smoothed.errorM <= live.errorM + slack, "\(smoothed) against \(live)")
            #expect(abs(smoothed.zoneShares.values.reduce(0, +) - 1) < 0.02)
        }
    }

    /// A beacon is placed once one zone holds two-thirds of its belief, which starts spread over the whole floor:
    /// one clearly in a zone after the entry dwell as before, one standing on the border between two zones only
    /// once it has been heard for the reading lifetime. The first second's readings move the belief once that second
    /// has passed: the beacon has a zone to be placed in from then, and its visit starts there.
    @Test func aBeaconIsPlacedOnceItsBeliefPointsToAZone() throws {
        let site = try SitesConfiguration.parse(floorSites).sites[0]
        for (x, placedAfter) in [(4.0, 3.0), (10.0, 11.0)] {
            var tracker = SiteZoneTracker(site: site)
            var placedAt: Double?
            var since: Int64?
            for index in 0..<40 {
                let time = start + Int64(index) * second / 2
                for reading in readings(x: x, y: 4, index: index) {
                    tracker.add(beaconID: "tag", agent: reading.agent, timeMicros: time, rssi: reading.rssi)
                    tracker.agentProgressed(reading.agent, newestMicros: time, arrivalMicros: time)
                }
                for change in tracker.advance(nowMicros: time) {
                    if case .placement(_, "tag", .some, let sinceMicros) = change, placedAt == nil {
                        placedAt = Double(time - start) / 1e6
                        since = sinceMicros
                    }
                }
            }
            #expect(placedAt == placedAfter, "x = \(x): placed after \(String(describing: placedAt)) s")
            #expect(since == start + second)
            if x == 10 {
                let shares = try #require(tracker.beacons["tag"]).positionShares
                #expect(shares.allSatisfy { $0 < ZoneRules.firstZoneShare }, "\(shares)")
            }
        }
    }

    @Test func aMinuteOfPositionsIsPackedToTheDecimetre() {
        let minute = start
        let packed = ZoneStore.packed(
            [
                BeaconPosition(timeMicros: minute + 9_960_000, x: 3.14, y: -0.26, errorM: 1.05, zoneShares: [:]),
                BeaconPosition(timeMicros: minute + 59_999_999, x: 4_000, y: 17.65, errorM: 0, zoneShares: [:]),
            ], minute: minute)
        #expect(packed == "{99,31,-3,11,599,32767,177,0}")
        #expect(ZoneStore.json(["b": 0.25, "a": 0.75]) == #"{"a":0.75,"b":0.25}"#)
    }
}
