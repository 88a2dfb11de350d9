@testable import BeaconIngest
import Foundation
import TestServers
import Testing

extension ZoneChange {
    var isVisit: Bool {
        switch self {
        case .visitOpened, .visitClosed: true
        case .placement, .occupancy, .agentState, .position, .positionMinute, .merged: false
        }
    }
}

/// The rules on levels as given: the sites here do not smooth (the filter has tests of its own).
@Suite struct SiteZoneTrackerTests {
    let site = try! SitesConfiguration.parse(testSites.replacingOccurrences(of: "- id: hq", with: "- id: hq\n    rssi_smoothing: none")).sites[0]
    let start: Int64 = 1_767_225_600_000_000  // a minute boundary
    let second: Int64 = 1_000_000

    /// A beacon heard every second by both agents: louder at the lobby agent for `moveAt` seconds, then at the lab's.
    func run(seconds: Int, moveAt: Int, noise: (Int) -> Double = { _ in 0 }) -> (SiteZoneTracker, [ZoneChange]) {
        var tracker = SiteZoneTracker(site: site)
        var changes: [ZoneChange] = []
        for index in 0..<seconds {
            let time = start + Int64(index) * second
            let inLobby = index < moveAt
            tracker.add(beaconID: "b", agent: "hq-a1", timeMicros: time, rssi: (inLobby ? -60 : -75) + noise(index))
            tracker.add(beaconID: "b", agent: "hq-a2", timeMicros: time + 1000, rssi: (inLobby ? -75 : -60) - noise(index))
            tracker.agentProgressed("hq-a1", newestMicros: time, arrivalMicros: time)
            tracker.agentProgressed("hq-a2", newestMicros: time + 1000, arrivalMicros: time)
            changes += tracker.advance(nowMicros: time)
        }
        return (tracker, changes)
    }

    @Test func aMoveBecomesTwoVisitsAndTheMinutesCountIt() {
        let (tracker, changes) = run(seconds: 270, moveAt: 95)
        let visits = changes.filter(\.isVisit)
        #expect(
            visits == [
                .visitOpened(site: "hq", zone: "lobby", beaconID: "b", enterMicros: start),
                // Dated at the first reading that said lab (the lobby agent's at 95 s), where the readings as heard
                // turned: the decision came 10 s later.
                .visitClosed(site: "hq", beaconID: "b", enterMicros: start, exitMicros: start + 95 * second),
                .visitOpened(site: "hq", zone: "lab", beaconID: "b", enterMicros: start + 95 * second),
            ])
        #expect(tracker.zone(of: "b") == "lab")
        var minutes: [String: [Int]] = [:]
        var seconds: [String: [Double]] = [:]
        for case .occupancy(_, let zone, _, let occupants, let occupantSeconds) in changes {
            minutes[zone, default: []].append(occupants)
            seconds[zone, default: []].append(occupantSeconds)
        }
        // Minutes 0-2 are counted (minute 3 waits for the counting lag). Minute 1 is 35 s in the lobby and 25 s in
        // the lab: the beacon counts in the lobby only.
        #expect(minutes["lobby"] == [1, 1, 0])
        #expect(minutes["lab"] == [0, 0, 1])
        #expect(seconds["lobby"] == [60, 35, 0])
        #expect(seconds["lab"] == [0, 25, 60])
    }

    /// With the site's Kalman smoothing (the default) and readings that wobble by ±4 dB, a beacon crosses from the
    /// lobby to the lab at 85 s. The smoothed levels turn seconds later and the decision waits for evidence; the
    /// history is dated where the readings as heard turned, so minute 1 (25 s lobby, 35 s lab) counts it in the lab.
    @Test func aSmoothedMoveIsDatedWhereTheReadingsTurnedNotWhereTheEvidenceBegan() throws {
        let smoothed = try SitesConfiguration.parse(testSites).sites[0]
        var tracker = SiteZoneTracker(site: smoothed)
        var changes: [(decidedMicros: Int64, change: ZoneChange)] = []
        for index in 0..<300 {
            let time = start + Int64(index) * second
            let inLobby = index < 85
            let wobble = Double([3, -4, 1, 4, -2, -3, 0, 2, -1][index % 9])
            tracker.add(beaconID: "b", agent: "hq-a1", timeMicros: time, rssi: (inLobby ? -60 : -75) + wobble)
            tracker.add(beaconID: "b", agent: "hq-a2", timeMicros: time + 1000, rssi: (inLobby ? -75 : -60) - wobble)
            tracker.agentProgressed("hq-a1", newestMicros: time, arrivalMicros: time)
            tracker.agentProgressed("hq-a2", newestMicros: time + 1000, arrivalMicros: time)
            changes += tracker.advance(nowMicros: time).map { (time, $0) }
        }
        let moves = changes.filter { if case .visitOpened(_, "lab", _, _) = $0.change { true } else { false } }
        let move = try #require(moves.first)
        guard case .visitOpened(_, _, _, let enter) = move.change else { return }
        #expect(moves.count == 1)
        #expect(abs(enter - (start + 85 * second)) <= 2 * second, "dated at \(Double(enter - start) / 1e6) s")
        #expect(move.decidedMicros - enter >= 5 * second, "decided at \(Double(move.decidedMicros - start) / 1e6) s")
        let minuteOne = changes.compactMap { entry -> (String, Int)? in
            guard case .occupancy(_, let zone, start + 60 * second, let occupants, _) = entry.change else { return nil }
            return (zone, occupants)
        }
        #expect(minuteOne.count == 2 && minuteOne.allSatisfy { $0.1 == ($0.0 == "lab" ? 1 : 0) }, "\(minuteOne)")
    }

    /// A move the evidence takes minutes to confirm (the lab only 1 dB louder, beyond the small margin of a beacon
    /// a minute in the lobby) is dated at most the history lag (60 s) before it was decided: the minutes counted by then stay as they were. (Zones
    /// scored by their loudest agent, so that the levels are the readings.)
    @Test func aMoveIsDatedAtMostTheHistoryLagBack() throws {
        let loudest = try SitesConfiguration.parse(
            testSites.replacingOccurrences(of: "- id: hq", with: "- id: hq\n    rssi_smoothing: none\n    zone_scoring: loudest")).sites[0]
        var tracker = SiteZoneTracker(site: loudest)
        var changes: [(decidedMicros: Int64, change: ZoneChange)] = []
        for index in 0..<420 {
            let time = start + Int64(index) * second
            let inLobby = index < 60
            tracker.add(beaconID: "b", agent: "hq-a1", timeMicros: time, rssi: inLobby ? -60 : -66)
            tracker.add(beaconID: "b", agent: "hq-a2", timeMicros: time + 1000, rssi: inLobby ? -75 : -65)
            tracker.agentProgressed("hq-a1", newestMicros: time, arrivalMicros: time)
            tracker.agentProgressed("hq-a2", newestMicros: time + 1000, arrivalMicros: time)
            changes += tracker.advance(nowMicros: time).map { (time, $0) }
        }
        let move = changes.first { if case .visitOpened(_, "lab", _, _) = $0.change { true } else { false } }
        guard let move, case .visitOpened(_, _, _, let enter) = move.change else {
            Issue.record("no move: \(changes.map(\.change))")
            return
        }
        #expect(move.decidedMicros - start > 180 * second)
        #expect(enter == move.decidedMicros - 60 * second)
        // Every minute counted before the decision has the beacon in the lobby.
        let countedBefore = changes.filter { entry in
            if case .occupancy(_, "lobby", _, 1, _) = entry.change { entry.decidedMicros < move.decidedMicros } else { false }
        }
        let lobbyMinutesBefore = changes.filter { entry in
            if case .occupancy(_, "lobby", _, _, _) = entry.change { entry.decidedMicros < move.decidedMicros } else { false }
        }
        #expect(!countedBefore.isEmpty && countedBefore.count == lobbyMinutesBefore.count)
    }

    /// Three rooms in a row, doors between neighbours only: a beacon whose readings jump from room a to room c
    /// (through b's walls) needs three times the evidence to move there than to move to b.
    @Test func aMoveBetweenZonesWithoutADoorNeedsMoreEvidence() throws {
        func decision(doors: String, to room: String) throws -> Int64? {
            let rooms = try SitesConfiguration.parse(
                """
                sites:
                  - id: hq
                    rssi_smoothing: none
                    zone_scoring: loudest
                    zones: [{id: a}, {id: b}, {id: c}]
                    agents: [{id: a1, zone: a}, {id: b1, zone: b}, {id: c1, zone: c}]
                    zone_switch_settled_s: 0
                \(doors)
                """).sites[0]
            var tracker = SiteZoneTracker(site: rooms)
            for index in 0..<200 {
                let time = start + Int64(index) * second
                for agent in ["a1", "b1", "c1"] {
                    let loudest = index < 30 ? "a1" : room + "1"
                    tracker.add(beaconID: "b", agent: agent, timeMicros: time, rssi: agent == loudest ? -60 : -72)
                    tracker.agentProgressed(agent, newestMicros: time, arrivalMicros: time)
                }
                if tracker.advance(nowMicros: time).contains(where: { if case .placement(_, _, .some(room), _) = $0 { true } else { false } }) {
                    return Int64(index)
                }
            }
            return nil
        }
        let doors = "    doors: [[a, b], [b, c]]"
        // 10 dB beyond the margin: 200 dB·s in 20 s, 600 in 60.
        #expect(try decision(doors: doors, to: "b") == 50)
        #expect(try decision(doors: doors, to: "c") == 90)
        #expect(try decision(doors: "", to: "c") == 50)
        #expect(try decision(doors: doors + "\n    zone_switch_doorless_factor: 1", to: "c") == 50)
    }

    @Test func aBeaconWalkingThroughThreeRoomsCountsOnceInTheMinute() throws {
        let rooms = try SitesConfiguration.parse(
            """
            sites:
              - id: hq
                rssi_smoothing: none
                zones: [{id: a}, {id: b}, {id: c}]
                agents: [{id: a1, zone: a}, {id: b1, zone: b}, {id: c1, zone: c}]
            """).sites[0]
        var tracker = SiteZoneTracker(site: rooms)
        var changes: [ZoneChange] = []
        // In room a for 15 s, b for 30 s, then c; heard every second, loudest by the room's own agent, until the
        // first minute is counted (the history lag after it).
        for index in 0..<200 {
            let time = start + Int64(index) * second
            let room = index < 15 ? "a1" : index < 45 ? "b1" : "c1"
            for agent in ["a1", "b1", "c1"] {
                tracker.add(beaconID: "walker", agent: agent, timeMicros: time, rssi: agent == room ? -55 : -80)
                tracker.agentProgressed(agent, newestMicros: time, arrivalMicros: time)
            }
            changes += tracker.advance(nowMicros: time)
        }
        var first: [String: (occupants: Int, seconds: Double)] = [:]
        for case .occupancy(_, let zone, let minute, let occupants, let seconds) in changes where minute == start {
            first[zone] = (occupants, seconds)
        }
        #expect(first["a"]?.occupants == 0 && first["b"]?.occupants == 1 && first["c"]?.occupants == 0)
        #expect(first["a"]?.seconds == 15 && first["b"]?.seconds == 30 && first["c"]?.seconds == 15, "\(first)")
    }

    /// Data that ends half a second into a minute (a replay, the demo stopping): the beacons heard every two
    /// seconds until then were there through its end, and the last minute counts them.
    @Test func theEndOfTheDataCountsTheBeaconsStillThereInItsLastMinute() throws {
        let site = try SitesConfiguration.parse(
            """
            sites:
              - id: hq
                rssi_smoothing: none
                zones: [{id: a}]
                agents: [{id: a1, zone: a}]
            """).sites[0]
        var tracker = SiteZoneTracker(site: site)
        for index in 0..<60 {
            let time = start + Int64(index) * second
            if index.isMultiple(of: 2) { tracker.add(beaconID: "even", agent: "a1", timeMicros: time, rssi: -60) }
            tracker.add(beaconID: index == 59 ? "last" : "other", agent: "a1", timeMicros: time, rssi: -60)
            tracker.agentProgressed("a1", newestMicros: time, arrivalMicros: time)
        }
        let end = start + 60 * second + second / 2
        tracker.add(beaconID: "other", agent: "a1", timeMicros: end, rssi: -60)
        tracker.agentProgressed("a1", newestMicros: end, arrivalMicros: end)
        let counts = tracker.finish(closingVisits: true).compactMap { change -> (minute: Int64, occupants: Int)? in
            guard case .occupancy(_, "a", let minute, let occupants, _) = change else { return nil }
            return (minute, occupants)
        }
        // Minute 0: "even" and "other" (placed after the entry dwell, present for most of it); "last" was heard
        // once. Minute 1 (half a second): "even", last heard at 58 s, and "other" are still there.
        #expect(counts.map(\.minute) == [start, start + 60 * second])
        #expect(counts.map(\.occupants) == [2, 2], "\(counts)")
    }

    /// A lobby agent on the wall to the lab hears a lab beacon next to that wall louder than the lab's own agent
    /// does. Scored by the loudest agent, the beacon goes to the lobby; scored by what the site learned of the
    /// lobby's and the lab's beacons over a few minutes (all agents together), it is in the lab.
    @Test(arguments: [ZoneScoring.pattern, .loudest])
    func anAgentOnAWallDoesNotPullTheNextRoomsBeaconsOnceTheSiteHasLearned(scoring: ZoneScoring) throws {
        let rooms = try SitesConfiguration.parse(
            """
            sites:
              - id: hq
                zone_scoring: \(scoring.rawValue)
                zones: [{id: lobby}, {id: lab}]
                agents: [{id: lobby-centre, zone: lobby}, {id: lobby-wall, zone: lobby}, {id: lab-centre, zone: lab}]
            """).sites[0]
        var tracker = SiteZoneTracker(site: rooms)
        // Levels at lobby-centre, lobby-wall and lab-centre: beacons around the lobby and the lab, with the small
        // differences between spots of a room, then (from 300 s) one in the lab next to the lobby's wall agent.
        let lobby: [[Double]] = [[-55, -63, -78], [-58, -57, -74], [-60, -66, -80]]
        let lab: [[Double]] = [[-80, -72, -55], [-78, -66, -58], [-82, -75, -60]]
        let nextToTheWall: [Double] = [-76, -57, -62]
        let agents = ["lobby-centre", "lobby-wall", "lab-centre"]
        for index in 0..<420 {
            let time = start + Int64(index) * second
            var heard: [(String, [Double])] = []
            for (number, levels) in lobby.enumerated() { heard.append(("lobby-\(number)", levels)) }
            for (number, levels) in lab.enumerated() { heard.append(("lab-\(number)", levels)) }
            if index >= 300 { heard.append(("by-the-wall", nextToTheWall)) }
            for (beacon, levels) in heard {
                // ±2 dB that changes every few seconds, different per agent.
                for (number, agent) in agents.enumerated() {
                    let wobble = Double((index / 3 + number * 5 + beacon.count) % 5) - 2
                    tracker.add(beaconID: beacon, agent: agent, timeMicros: time + Int64(number), rssi: levels[number] + wobble)
                }
            }
            for (number, agent) in agents.enumerated() {
                tracker.agentProgressed(agent, newestMicros: time + Int64(number), arrivalMicros: time)
            }
            _ = tracker.advance(nowMicros: time)
        }
        #expect((0..<3).allSatisfy { tracker.zone(of: "lobby-\($0)") == "lobby" && tracker.zone(of: "lab-\($0)") == "lab" })
        #expect(tracker.zone(of: "by-the-wall") == (scoring == .pattern ? "lab" : "lobby"))
    }

    @Test func noiseBelowTheMarginDoesNotMoveTheBeacon() {
        // ±6 dB alternating: the lab reading is sometimes 3 dB louder, never for 4 s in a row.
        let (_, changes) = run(seconds: 120, moveAt: 1000, noise: { $0 % 3 == 0 ? -9 : 0 })
        let visits = changes.filter(\.isVisit)
        #expect(visits == [.visitOpened(site: "hq", zone: "lobby", beaconID: "b", enterMicros: start)])
    }

    @Test func aBeaconNotHeardLeavesWhenItWasLastHeard() {
        var (tracker, changes) = run(seconds: 30, moveAt: 1000)
        // The agents go on (other beacons), this one is silent.
        for index in 30..<200 {
            let time = start + Int64(index) * second
            tracker.add(beaconID: "other", agent: "hq-a1", timeMicros: time, rssi: -70)
            tracker.agentProgressed("hq-a1", newestMicros: time, arrivalMicros: time)
            tracker.agentProgressed("hq-a2", newestMicros: time, arrivalMicros: time)
            changes += tracker.advance(nowMicros: time)
        }
        #expect(changes.contains(.visitClosed(site: "hq", beaconID: "b", enterMicros: start, exitMicros: start + 29 * second + 1000)))
        #expect(tracker.zone(of: "b") == nil)
    }

    @Test func aLaggingAgentHoldsTheSiteBackSoItsReadingsCount() {
        var tracker = SiteZoneTracker(site: site)
        // hq-a1 is two minutes ahead; hq-a2 (the lab) delivers later but within the allowed lateness.
        for index in 0..<120 {
            let time = start + Int64(index) * second
            tracker.add(beaconID: "b", agent: "hq-a1", timeMicros: time, rssi: -80)
            tracker.agentProgressed("hq-a1", newestMicros: time, arrivalMicros: start)
        }
        tracker.agentProgressed("hq-a2", newestMicros: start, arrivalMicros: start)
        var changes = tracker.advance(nowMicros: start)
        for index in 0..<120 {
            let time = start + Int64(index) * second + 500
            tracker.add(beaconID: "b", agent: "hq-a2", timeMicros: time, rssi: -55)
            tracker.agentProgressed("hq-a2", newestMicros: time, arrivalMicros: start)
            changes += tracker.advance(nowMicros: start)
        }
        #expect(tracker.lateReadings == 0)
        let opened = changes.compactMap { change -> String? in
            if case .visitOpened(_, let zone, _, _) = change { return zone }
            return nil
        }
        // Had the lobby's readings been applied before the lab's arrived, the beacon would have started there.
        #expect(opened == ["lab"])
    }

    /// hq-a2 goes silent: the site waits for it for the allowed lateness (5 minutes of the ingest's time), then
    /// lets it go; what it delivers after that is behind the watermark, counted late and not applied.
    @Test func aSilentAgentHoldsTheSiteForTheAllowedLatenessThenItsReadingsAreLate() {
        var tracker = SiteZoneTracker(site: site)
        tracker.agentProgressed("hq-a2", newestMicros: start, arrivalMicros: start)
        for index in 0..<120 {
            let time = start + Int64(index) * second
            tracker.add(beaconID: "b", agent: "hq-a1", timeMicros: time, rssi: -60)
            tracker.agentProgressed("hq-a1", newestMicros: time, arrivalMicros: time)
        }
        // Both silent for more than 10 s: the site waits for them.
        #expect(
            tracker.advance(nowMicros: start + 299 * second) == [
                .agentState(site: "hq", agent: "hq-a1", state: .holding, sinceMicros: start + 129 * second),
                .agentState(site: "hq", agent: "hq-a2", state: .holding, sinceMicros: start + 10 * second),
            ])
        #expect(tracker.pendingReadings == 119)  // the first one is at hq-a2's progress, so applied
        let released = tracker.advance(nowMicros: start + 301 * second)
        #expect(released.first == .agentState(site: "hq", agent: "hq-a2", state: .letGo, sinceMicros: start + 300 * second))
        #expect(released.contains(.visitOpened(site: "hq", zone: "lobby", beaconID: "b", enterMicros: start)))
        #expect(tracker.watermarkMicros == start + 119 * second)
        for index in 0..<120 {
            tracker.add(beaconID: "b", agent: "hq-a2", timeMicros: start + Int64(index) * second + 500, rssi: -40)
        }
        #expect(tracker.lateReadings == 119)  // the last one is past hq-a1's progress: it waits
        #expect(tracker.zone(of: "b") == "lobby")
    }

    /// Both agents stop (a gateway's power cut): for the allowed lateness the site waits, then its event time goes
    /// on at the ingest clock's pace from where the agents left it, so the beacon's visit closes at its last
    /// sighting and its minutes are counted; a batch that turns up later is behind the watermark, counted late.
    @Test func aSiteThatGoesDarkFollowsTheIngestsClock() {
        var tracker = SiteZoneTracker(site: site)
        var changes: [ZoneChange] = []
        for index in 0..<120 {
            let time = start + Int64(index) * second
            tracker.add(beaconID: "b", agent: "hq-a1", timeMicros: time, rssi: -60)
            tracker.agentProgressed("hq-a1", newestMicros: time, arrivalMicros: time)
            tracker.agentProgressed("hq-a2", newestMicros: time, arrivalMicros: time)
            changes += tracker.advance(nowMicros: time)
        }
        let last = start + 119 * second
        func closed(_ changes: [ZoneChange]) -> Bool {
            changes.contains(.visitClosed(site: "hq", beaconID: "b", enterMicros: start, exitMicros: last))
        }
        // Within the lateness nothing moves: the agents may still deliver.
        changes += tracker.advance(nowMicros: last + 300 * second)
        #expect(tracker.watermarkMicros == last && !closed(changes))
        // Past it by more than the counting lag (60 s) and a minute: the visit closes and the minutes are counted.
        changes += tracker.advance(nowMicros: last + 300 * second + 95 * second)
        #expect(tracker.watermarkMicros == last + 95 * second)
        #expect(closed(changes), "\(changes)")
        #expect(tracker.zone(of: "b") == nil)
        let counted = changes.compactMap { change -> Int64? in
            if case .occupancy(_, "lobby", let minute, 1, _) = change { return minute }
            return nil
        }
        #expect(counted == [start, start + 60 * second])
        tracker.add(beaconID: "b", agent: "hq-a1", timeMicros: last + second, rssi: -60)
        #expect(tracker.lateReadings == 1)
        // An hour later: the watermark stopped two minutes past the counting lag (the history lag, 60 s); no empty
        // minutes are made up.
        let before = changes.count
        changes += tracker.advance(nowMicros: last + 3600 * second)
        #expect(tracker.watermarkMicros == last + 180 * second)
        #expect(changes.count - before <= 2 * 2)  // at most one more minute, for both zones
    }

    /// hq-a2 never starts: the site waits for its first batch for the first-batch wait (30 s), not the allowed
    /// lateness, then goes on without it.
    @Test func anAgentNeverHeardHoldsTheSiteOnlyForTheFirstBatchWait() {
        var tracker = SiteZoneTracker(site: site)
        var changes: [ZoneChange] = []
        for index in 0..<40 {
            let time = start + Int64(index) * second
            tracker.add(beaconID: "b", agent: "hq-a1", timeMicros: time, rssi: -60)
            tracker.agentProgressed("hq-a1", newestMicros: time, arrivalMicros: time)
            changes += tracker.advance(nowMicros: time)
            if index == 30 {
                #expect(!changes.contains { $0.isVisit })
                #expect(changes.contains(.agentState(site: "hq", agent: "hq-a2", state: .awaited, sinceMicros: start)))
            }
        }
        #expect(changes.contains(.agentState(site: "hq", agent: "hq-a2", state: .letGo, sinceMicros: start + 30 * second)))
        #expect(changes.contains(.visitOpened(site: "hq", zone: "lobby", beaconID: "b", enterMicros: start)))
        #expect(changes.filter { if case .agentState(_, "hq-a1", _, _) = $0 { true } else { false } }.count == 1)  // live, once
        // Heard at last, it holds the site again like any agent.
        tracker.agentProgressed("hq-a2", newestMicros: start + 40 * second, arrivalMicros: start + 40 * second)
        #expect(tracker.advance(nowMicros: start + 40 * second).first == .agentState(site: "hq", agent: "hq-a2", state: .live, sinceMicros: start + 40 * second))
    }

    /// A site resumed from its open visits whose agents never come back goes dark from the restart on.
    @Test func aSiteResumedFromOpenVisitsWhoseAgentsNeverReturnEmpties() {
        var tracker = SiteZoneTracker(site: site)
        let lastSeen = start + 50 * second
        let restart = start + 3600 * second
        tracker.resume(
            openVisits: [.init(beaconID: "b", zone: "lobby", enterMicros: start, lastSeenMicros: lastSeen)], lastCountedMinuteMicros: nil,
            nowMicros: restart)
        #expect(tracker.zone(of: "b") == "lobby")
        #expect(!tracker.advance(nowMicros: restart + 300 * second).contains { $0.isVisit })
        // Past the lateness by the counting lag and the rest of the minute.
        let changes = tracker.advance(nowMicros: restart + 300 * second + 75 * second)
        #expect(changes.contains(.visitClosed(site: "hq", beaconID: "b", enterMicros: start, exitMicros: lastSeen)))
        #expect(changes.contains(.occupancy(site: "hq", zone: "lobby", minuteMicros: start, occupants: 1, occupantSeconds: 50)))
    }

    @Test func theAllowedLatenessIsASiteKey() throws {
        let sites = try SitesConfiguration.parse(
            "sites: [{id: hq, zones: [{id: lobby}], allowed_lateness_s: 60, rssi_smoothing: none}]")
        #expect(sites.sites[0].zoneRules.allowedLatenessMicros == 60_000_000)
        #expect(sites.sites[0].rssiSmoothing == .none)
        #expect(ZoneRules().allowedLatenessMicros == 300_000_000)
        let waiting = try SitesConfiguration.parse("sites: [{id: hq, zones: [{id: a}], first_batch_wait_s: 5}]")
        #expect(waiting.sites[0].zoneRules.firstBatchWaitMicros == 5_000_000)
        #expect(throws: SitesError.self) { try SitesConfiguration.parse("sites: [{id: hq, zones: [{id: a}], rssi_smoothing: median}]") }
    }
}

@Suite struct ProximitySmootherTests {
    @Test func smoothsNoiseFollowsAMoveAndPrunesOnlyTheGivenSite() {
        var smoother = ProximitySmoother()
        let hq = AgentKey(site: "hq", agent: "hq-a1")
        let lab = AgentKey(site: "lab", agent: "lab-a1")
        var last = 0.0
        for second in 0..<20 {
            last = smoother.filter(beaconID: "b", agent: hq, rssi: second % 2 == 0 ? -64 : -56, timeMicros: Int64(second) * 1_000_000)
        }
        #expect(abs(last + 60) < 2.5, "alternating ±4 dB averages out: \(last)")
        for second in 20..<40 {
            last = smoother.filter(beaconID: "b", agent: hq, rssi: -75, timeMicros: Int64(second) * 1_000_000)
        }
        #expect(abs(last + 75) < 1.5, "a 15 dB step is followed within 20 s: \(last)")
        _ = smoother.filter(beaconID: "b", agent: lab, rssi: -70, timeMicros: 0)
        smoother.prune(site: "hq", before: 100_000_000)
        #expect(smoother.trackedPairs == 1)
        smoother.prune(site: "lab", before: 100_000_000)
        #expect(smoother.trackedPairs == 0)
    }
}

@Suite struct ZonePatternsTests {
    /// Zones 0 and 1; agents 0 and 1 serve zone 0, agent 2 zone 1.
    let zoneOfAgent = [0, 0, 1]

    func heard(_ levels: [(Int, Double)]) -> [(agent: Int, level: Double)] { levels.map { (agent: $0.0, level: $0.1) } }

    @Test func beforeLearningEachZoneExpectsItsOwnAgentsLoudest() {
        let patterns = ZonePatterns(zoneCount: 2, zoneOfAgent: zoneOfAgent)
        var scores = [0.0, 0.0]
        patterns.score(levels: heard([(0, -60), (1, -64), (2, -75)]), into: &scores)
        #expect(scores[0] > scores[1])
        patterns.score(levels: heard([(0, -80), (1, -70), (2, -62)]), into: &scores)
        #expect(scores[1] > scores[0])
        // The same pattern 20 dB quieter (a weaker transmitter) scores the same.
        var quieter = [0.0, 0.0]
        patterns.score(levels: heard([(0, -100), (1, -90), (2, -82)]), into: &quieter)
        #expect(zip(quieter, scores).allSatisfy { abs($0 - $1) < 1e-9 })
    }

    @Test func learnsHowItsAgentsHearItsBeaconsButOnlyWhenItsOwnAgentIsTheLoudest() {
        var patterns = ZonePatterns(zoneCount: 2, zoneOfAgent: zoneOfAgent)
        for _ in 0..<5_000 {
            // Zone 1's beacons: agent 1 (zone 0's, on the wall) 4 dB below zone 1's own agent.
            patterns.learn(zone: 1, agent: 1, levels: heard([(0, -80), (1, -64), (2, -60)]))
            // A beacon said to be in zone 1 whose loudest agent is zone 0's teaches nothing.
            patterns.learn(zone: 1, agent: 0, levels: heard([(0, -50), (1, -64), (2, -60)]))
        }
        let learned = patterns.expectation(zone: 1, agent: 1)
        #expect(abs(learned.meanDb - -4) < 0.1)  // what is left of the prior
        #expect(learned.deviationDb < 1)
        #expect(patterns.expectation(zone: 1, agent: 0).meanDb == ZonePatterns.priorOtherDb)
        // Now a beacon that agent 1 hears loudest, with zone 1's agent 4 dB below and zone 0's centre far down, is
        // zone 1's.
        var scores = [0.0, 0.0]
        patterns.score(levels: heard([(0, -78), (1, -60), (2, -64)]), into: &scores)
        #expect(scores[1] > scores[0])
    }
}
