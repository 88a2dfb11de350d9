import BeaconIngest
import TestServers
import Testing
import WorkQueue

/// What zone changes leave in the database: visits by (beacon, enter) and minutes by (zone, minute), each write an
/// upsert as the writer's.
struct ZoneTables: Equatable {
    struct Visit: Equatable { var zone: String; var exitMicros: Int64? }
    struct Minute: Equatable { var occupants: Int; var seconds: Double }
    struct VisitKey: Hashable { var beaconID: String; var enterMicros: Int64 }
    struct MinuteKey: Hashable { var zone: String; var minuteMicros: Int64 }

    var visits: [VisitKey: Visit] = [:]
    var minutes: [MinuteKey: Minute] = [:]

    mutating func write(_ changes: [ZoneChange]) {
        for change in changes {
            switch change {
            case .visitOpened(_, let zone, let beaconID, let enter):
                let key = VisitKey(beaconID: beaconID, enterMicros: enter)
                if visits[key] == nil { visits[key] = Visit(zone: zone) }
            case .visitClosed(_, let beaconID, let enter, let exit):
                visits[VisitKey(beaconID: beaconID, enterMicros: enter)]?.exitMicros = exit
            case .occupancy(_, let zone, let minute, let occupants, let seconds):
                minutes[MinuteKey(zone: zone, minuteMicros: minute)] = Minute(occupants: occupants, seconds: seconds)
            case .merged(_, let addressBeaconID, let beaconID):
                // As `merge_address_beacon` files the address beacon's visits under the beacon.
                for (key, visit) in visits where key.beaconID == addressBeaconID {
                    visits[key] = nil
                    visits[VisitKey(beaconID: beaconID, enterMicros: key.enterMicros)] = visit
                }
            case .agentState, .placement, .position, .positionMinute:
                break
            }
        }
    }
}

@Suite struct ZoneCheckpointTests {
    /// Two zones, an agent in each and a third that never sends; `history` as in the sites file, over 60 s.
    var site = Self.site(history: "crossings")

    static func site(history: String) -> SitesConfiguration.Site {
        try! SitesConfiguration.parse(
            """
            sites:
              - id: hq
                allowed_lateness_s: 20
                zone_history: \(history)
                history_lag_s: 60
                zones: [{id: lobby}, {id: lab}]
                agents:
                  - {id: hq-a1, zone: lobby}
                  - {id: hq-a2, zone: lab}
                  - {id: hq-a3, zone: lab}
            """
        ).sites[0]
    }
    let start: Int64 = 1_767_225_600_000_000
    let second: Int64 = 1_000_000

    /// One agent's batch of second `index`: six beacons heard four times each, with deterministic noise; beacon k
    /// changes rooms every 70 + 20 k seconds and is away (unheard) for 45 s of every 400.
    func batch(agent: Int, second index: Int) -> [SiteZoneTracker.BeaconReading] {
        var readings: [SiteZoneTracker.BeaconReading] = []
        for beacon in 0..<6 {
            guard (index + 37 * beacon) % 400 >= 45 else { continue }
            let inLobby = (index / (70 + 20 * beacon)) % 2 == 0
            for quarter in 0..<4 {
                var noise = UInt64(index * 7919 + beacon * 104_729 + quarter * 31 + agent * 1_299_709)
                noise = noise &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                let jitter = Double((noise >> 33) % 1200) / 100 - 6
                let near = (agent == 0) == inLobby
                readings.append(
                    .init(
                        beaconID: "b\(beacon)", timeMicros: start + Int64(index) * second + Int64(quarter) * 250_000 + Int64(agent) * 1000,
                        rssi: (near ? -62 : -74) + jitter))
            }
        }
        return readings
    }

    /// Ten minutes of two agents' batches, one a second (the second agent's a second late); at each of
    /// `crashes` (seconds) the tracker is lost and a new one restored from the last checkpoint, given the readings
    /// "stored" after its watermark (without `replay`, not given them). Returns what the database would hold.
    func play(crashes: Set<Int>, replay: Bool = true) throws -> (tables: ZoneTables, checkpoints: Int) {
        var tracker = SiteZoneTracker(site: site)
        var tables = ZoneTables()
        var stored: [(agent: String, reading: SiteZoneTracker.BeaconReading)] = []
        var checkpoint: (state: [UInt8], watermark: Int64)?
        var checkpoints = 0
        for index in 0..<600 {
            let now = start + Int64(index) * second + 900_000
            for (agent, id) in ["hq-a1", "hq-a2"].enumerated() where index >= agent {
                let readings = batch(agent: agent, second: index - agent)
                tracker.add(readings, agent: id)
                tracker.agentProgressed(id, newestMicros: readings.map(\.timeMicros).max() ?? 0, arrivalMicros: now)
                stored += readings.map { (id, $0) }
                tables.write(tracker.advance(nowMicros: now))
                if tracker.checkpointDue {
                    checkpoint = (tracker.takeCheckpoint(), tracker.watermarkMicros)
                    checkpoints += 1
                }
            }
            if crashes.contains(index), let saved = checkpoint {
                tracker = SiteZoneTracker(site: site)
                try tracker.restore(checkpoint: saved.state)
                var newest: [String: Int64] = [:]
                for (agent, reading) in stored where replay && reading.timeMicros > saved.watermark {
                    tracker.add([reading], agent: agent)
                    newest[agent] = max(newest[agent] ?? .min, reading.timeMicros)
                }
                for (agent, time) in newest { tracker.agentProgressed(agent, newestMicros: time, arrivalMicros: now) }
            }
        }
        return (tables, checkpoints)
    }

    /// A tracker given `seconds` of both agents' batches, each applied as it arrives.
    func bothAgentsHeard(seconds: Int) -> SiteZoneTracker {
        var tracker = SiteZoneTracker(site: site)
        for index in 0..<seconds {
            for agent in 0..<2 {
                let readings = batch(agent: agent, second: index)
                tracker.add(readings, agent: "hq-a\(agent + 1)")
                tracker.agentProgressed(
                    "hq-a\(agent + 1)", newestMicros: readings.map(\.timeMicros).max() ?? start,
                    arrivalMicros: start + Int64(index) * second + 900_000)
            }
            _ = tracker.advance(nowMicros: start + Int64(index) * second + 900_000)
        }
        return tracker
    }

    /// Five minutes of both agents' readings passed by the watermark at once (as a read-back gives them, or an
    /// agent behind the others catching up), applied 500 readings at a time with the writer free to turn between
    /// the pieces: the same visits and minutes as applied in one piece, in as many calls as pieces.
    @Test func aBacklogAppliedInPiecesEndsLikeOneAppliedAtOnce() {
        var readings = 0
        func backlog() -> SiteZoneTracker {
            var tracker = SiteZoneTracker(site: site)
            readings = 0
            for index in 0..<300 {
                for agent in 0..<2 {
                    let batch = batch(agent: agent, second: index)
                    readings += batch.count
                    tracker.add(batch, agent: "hq-a\(agent + 1)")
                }
            }
            let end = start + 300 * second
            for agent in ["hq-a1", "hq-a2"] { tracker.agentProgressed(agent, newestMicros: end, arrivalMicros: end) }
            return tracker
        }
        // Past the lateness: the watermark moves without the agent that never sends.
        let now = start + 325 * second
        var whole = backlog()
        var wholeTables = ZoneTables()
        wholeTables.write(whole.advance(nowMicros: now))
        #expect(!whole.hasReadyReadings)
        var pieces = backlog()
        var piecesTables = ZoneTables()
        var calls = 0
        repeat {
            piecesTables.write(pieces.advance(nowMicros: now, applyingAtMost: 500))
            calls += 1
        } while pieces.hasReadyReadings && calls < 1_000
        #expect(readings > 10_000 && calls == (readings + 499) / 500, "\(readings) readings in \(calls) calls")
        #expect(!wholeTables.visits.isEmpty && !wholeTables.minutes.isEmpty)
        #expect(piecesTables == wholeTables)
        #expect(pieces.watermarkMicros == whole.watermarkMicros)
    }

    /// Lost twice mid-stream (a minute and a half and a few seconds after a checkpoint), the tracker restored from
    /// its checkpoints ends with the same visits and minutes as one never lost, to the microsecond.
    @Test func aTrackerRestoredFromItsCheckpointEndsLikeOneNeverLost() throws {
        let undisturbed = try play(crashes: [])
        let restored = try play(crashes: [150, 331])
        #expect(undisturbed.checkpoints >= 7)
        #expect(undisturbed.tables.visits.count >= 12, "\(undisturbed.tables.visits.count) visits")
        #expect(undisturbed.tables.minutes.values.contains { $0.occupants > 0 })
        #expect(restored.tables == undisturbed.tables)
        // Without the readings stored after the checkpoint the minutes in progress come out otherwise.
        #expect(try play(crashes: [150], replay: false).tables != undisturbed.tables)
    }

    /// The same with the history decided by the likeliest path: the paths not decided yet are in the checkpoint
    /// (with `confirmed`, the live stays they are checked against too).
    @Test(arguments: ["path", "confirmed"])
    func aTrackerWithPathHistoryRestoredFromItsCheckpointEndsLikeOneNeverLost(history: String) throws {
        var withPath = self
        withPath.site = Self.site(history: history)
        let undisturbed = try withPath.play(crashes: [])
        let restored = try withPath.play(crashes: [150, 331])
        #expect(undisturbed.tables.visits.count >= 12, "\(undisturbed.tables.visits.count) visits")
        #expect(restored.tables == undisturbed.tables)
        #expect(undisturbed.tables != (try play(crashes: [])).tables)
    }

    /// The same with the likeliest path in the checkpoint (its scores, back-pointers and the history's visit; with
    /// `confirmed`, the live stays).
    /// (Seconds of computation: on a thread of its own, not the few threads of the cooperative pool.)
    @Test(arguments: ["path", "confirmed"])
    func noValueInAnyFieldOfACheckpointWithPathsMakesTheTrackerTrap(history: String) async throws {
        var withPath = self
        withPath.site = Self.site(history: history)
        let damage = try await onThread { [withPath] in withPath.damageEveryField() }
        #expect(damage.refused > damage.tries / 2, "\(damage)")
    }

    @Test func aDamagedCheckpointOrOneOfOtherZonesIsRefusedAndChangesNothing() throws {
        var tracker = SiteZoneTracker(site: site)
        for index in 0..<200 {
            tracker.add(batch(agent: 0, second: index), agent: "hq-a1")
            tracker.agentProgressed("hq-a1", newestMicros: start + Int64(index) * second + 750_000, arrivalMicros: start + Int64(index) * second)
            _ = tracker.advance(nowMicros: start + Int64(index + 30) * second)
        }
        let state = tracker.takeCheckpoint()
        var fresh = SiteZoneTracker(site: site)
        for length in [0, 7, 8, 100, state.count / 2, state.count - 1] {
            #expect(throws: CheckpointError.self) { try fresh.restore(checkpoint: Array(state.prefix(length))) }
        }
        #expect(fresh.trackedBeacons == 0 && fresh.watermarkMicros == .min)
        #expect(throws: CheckpointError.self) { try fresh.restore(checkpoint: state + [0]) }
        var flipped = state
        flipped[0] = 9
        do {
            try fresh.restore(checkpoint: flipped)
            Issue.record("a checkpoint of another version was restored")
        } catch { #expect(error.code == .unknownVersion) }
        let other = try SitesConfiguration.parse(
            "sites: [{id: hq, zones: [{id: lobby}, {id: lab}, {id: yard}], agents: [{id: hq-a1, zone: lobby}, {id: hq-a2, zone: lab}, {id: hq-a3, zone: lab}]}]")
        var elsewhere = SiteZoneTracker(site: other.sites[0])
        do {
            try elsewhere.restore(checkpoint: state)
            Issue.record("a checkpoint of other zones was restored")
        } catch { #expect(error.code == .otherLayout) }
        // Another zone_history keeps its open visits elsewhere: the site resumes from its open visits instead.
        var otherHistory = SiteZoneTracker(site: Self.site(history: "confirmed"))
        do {
            try otherHistory.restore(checkpoint: state)
            Issue.record("a checkpoint of another zone history was restored")
        } catch { #expect(error.code == .otherHistory) }
        #expect(otherHistory.trackedBeacons == 0 && otherHistory.watermarkMicros == .min)
        try fresh.restore(checkpoint: state)
        #expect(fresh.trackedBeacons == tracker.trackedBeacons && fresh.watermarkMicros == tracker.watermarkMicros)
        #expect(fresh.takeCheckpoint() == state)
    }

    /// Every 8 bytes of a checkpoint overwritten in turn with an extreme value (the least and greatest integers,
    /// -1, NaN, infinity: what an edited or damaged row may hold in any field): each is refused as damage, or
    /// restores a tracker that then runs on without trapping.
    @Test func noValueInAnyFieldOfACheckpointMakesTheTrackerTrap() throws {
        let damage = damageEveryField()
        #expect(damage.refused > damage.tries / 2, "\(damage)")
    }

    /// Writes each extreme value over every eight bytes of a checkpoint in turn and restores it, running the tracker
    /// on when it is taken: how many were refused and how many ran, of how many tries.
    func damageEveryField() -> (refused: Int, restoredAndRan: Int, tries: Int) {
        var tracker = bothAgentsHeard(seconds: 200)
        let state = tracker.takeCheckpoint()
        let extremes: [UInt64] = [
            UInt64(bitPattern: .min), UInt64(bitPattern: .max), UInt64.max, Double.nan.bitPattern, Double.infinity.bitPattern,
            (-Double.infinity).bitPattern,
        ]
        var refused = 0
        var restoredAndRan = 0
        for offset in 0...(state.count - 8) {
            for extreme in extremes {
                var damaged = state
                for byte in 0..<8 { damaged[offset + byte] = UInt8(truncatingIfNeeded: extreme >> (8 * UInt64(byte))) }
                var restored = SiteZoneTracker(site: site)
                do {
                    try restored.restore(checkpoint: damaged)
                } catch {
                    refused += 1
                    continue
                }
                for index in 200..<203 {
                    let readings = batch(agent: 0, second: index)
                    restored.add(readings, agent: "hq-a1")
                    restored.agentProgressed("hq-a1", newestMicros: readings.map(\.timeMicros).max() ?? start, arrivalMicros: start + Int64(index) * second)
                    _ = restored.advance(nowMicros: start + Int64(index + 90) * second)
                }
                _ = restored.finish()
                _ = restored.takeCheckpoint()
                restoredAndRan += 1
            }
        }
        return (refused, restoredAndRan, (state.count - 7) * extremes.count)
    }

    /// The damage first seen in the field: a next minute to count of Int64.min.
    @Test func aNextMinuteOutOfRangeIsDamage() throws {
        var tracker = SiteZoneTracker(site: site)
        for index in 0..<100 {
            tracker.add(batch(agent: 0, second: index), agent: "hq-a1")
            tracker.agentProgressed("hq-a1", newestMicros: start + Int64(index) * second + 750_000, arrivalMicros: start + Int64(index) * second)
            _ = tracker.advance(nowMicros: start + Int64(index + 30) * second)
        }
        let state = tracker.takeCheckpoint()
        let (damaged, offset) = try #require(checkpointWithNextMinuteAtInt64Min(state))
        var fresh = SiteZoneTracker(site: site)
        do {
            try fresh.restore(checkpoint: damaged)
            Issue.record("a next minute of Int64.min was restored")
        } catch {
            #expect(error.code == .damaged && error.offset == offset)
        }
    }

    /// Past the bound the beacons heard least recently are forgotten: a placed one's visit closes when it was
    /// last heard, the others keep their state, and the checkpoint shrinks with the tracker.
    @Test func evictionClosesTheVisitsOfTheBeaconsHeardLeast() throws {
        var tracker = bothAgentsHeard(seconds: 120)
        let before = tracker.trackedBeacons
        let fullCheckpoint = tracker.takeCheckpoint().count
        #expect(before >= 5)
        let changes = tracker.evict(keeping: 2)
        #expect(tracker.trackedBeacons <= 2)
        let closed = changes.compactMap { change -> String? in
            if case .visitClosed(_, let beaconID, _, _) = change { return beaconID }
            return nil
        }
        #expect(closed.count == before - tracker.trackedBeacons, "\(changes)")
        #expect(tracker.takeCheckpoint().count < fullCheckpoint)
        #expect(tracker.evict(keeping: 2).isEmpty)
    }
}
