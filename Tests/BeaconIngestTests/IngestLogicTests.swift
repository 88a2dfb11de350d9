import BeaconBatteries
import BeaconMessaging
import BeaconWire
@testable import BeaconIngest
import TestServers
import Foundation
import Testing
import WorkQueue

@Suite struct AcknowledgementTrackerTests {
    let agent = AcknowledgementTracker.AgentKey(site: "hq", agent: "hq-a1")

    @Test func advancesOnlyOverContiguousSequences() {
        var tracker = AcknowledgementTracker()
        #expect(tracker.committed(agent, sequence: 1, firstUnacknowledged: 1) == 1)
        #expect(tracker.committed(agent, sequence: 3, firstUnacknowledged: 2) == 1)  // 2 is missing
        #expect(tracker.committed(agent, sequence: 4, firstUnacknowledged: 2) == 1)
        #expect(tracker.waiting(agent) == 2)
        #expect(tracker.committed(agent, sequence: 2, firstUnacknowledged: 2) == 4)  // the gap filled
        #expect(tracker.waiting(agent) == 0)
        // A redelivery of something already covered acknowledges again, unchanged.
        #expect(tracker.committed(agent, sequence: 3, firstUnacknowledged: 2) == 4)
        // Agents are independent.
        #expect(tracker.committedThrough(.init(site: "hq", agent: "hq-a2")) == 0)
    }

    @Test func batchesTheAgentDroppedAreNotWaitedFor() {
        var tracker = AcknowledgementTracker()
        #expect(tracker.committed(agent, sequence: 1, firstUnacknowledged: 1) == 1)
        // The agent's full spool dropped 2-9: its next batch says the oldest it still holds is 10.
        #expect(tracker.committed(agent, sequence: 11, firstUnacknowledged: 10) == 9)
        #expect(tracker.committed(agent, sequence: 10, firstUnacknowledged: 10) == 11)
    }

    @Test func progressResumesFromTheDatabase() {
        var tracker = AcknowledgementTracker()
        tracker.restore(agent, through: 40, above: [38, 41, 42, 44])
        #expect(tracker.committedThrough(agent) == 42)
        #expect(tracker.waiting(agent) == 1)
        #expect(tracker.committed(agent, sequence: 43, firstUnacknowledged: 43) == 44)
    }
}

@Suite struct SitesConfigurationTests {
    let valid = """
        sites:
          - id: hq
            timezone: Europe/Berlin
            path_loss_exponent: 2.5
            zones: [{id: lobby}, {id: lab, capacity: 12}]
            agents:
              - {id: hq-a1, zone: lobby, rssi_offset_db: 0}
              - {id: hq-a2, zone: lab}
        beacons:
          - {id: "eddystone:0102030405060708090a:0000000000a1", label: "cart 7", identity_key: "000102030405060708090a0b0c0d0e0f"}
        """

    @Test func theContractExampleParses() throws {
        let configuration = try SitesConfiguration.parse(valid)
        #expect(configuration.sites.map(\.id) == ["hq"])
        #expect(configuration.sites[0].zones.map(\.id) == ["lobby", "lab"])
        #expect(configuration.sites[0].zones[1].capacity == 12)
        #expect(configuration.agent(site: "hq", agent: "hq-a2")?.zone == "lab")
        #expect(configuration.agent(site: "hq", agent: "hq-a9") == nil)
        #expect(configuration.identities.map(\.beaconID) == ["eddystone:0102030405060708090a:0000000000a1"])
        #expect(configuration.beacons[0].label == "cart 7")
        #expect(configuration.batteries.isEmpty)
    }

    @Test func theRegistryNamesABeaconsCell() throws {
        let text = valid.replacingOccurrences(of: "label: \"cart 7\"", with: "label: \"cart 7\", battery: cr2477, battery_mah: 950, transmit_power_dbm: -4")
        let battery = try #require(try SitesConfiguration.parse(text).batteries["eddystone:0102030405060708090a:0000000000a1"])
        #expect(battery == BatteryDescription(chemistry: .cr2477, capacityMilliampHours: 950, transmitPowerDbm: -4))
        // The charge an advert takes falls with the transmit power.
        #expect(battery.chargePerAdvertMicrocoulombs < BatteryDescription().chargePerAdvertMicrocoulombs)
    }

    @Test func theRegistryPlacesABeaconOutdoors() throws {
        #expect(try SitesConfiguration.parse(valid).beacons[0].outdoors == false)
        let text = valid.replacingOccurrences(of: "label: \"cart 7\"", with: "label: \"cart 7\", outdoors: true")
        #expect(try SitesConfiguration.parse(text).beacons[0].outdoors == true)
    }

    /// Counts beyond what one writer takes on at a reload are refused before anything is built; duplicates among
    /// many are found without comparing every pair.
    @Test func aFileBeyondTheCountsIsRefused() throws {
        let many = (0...SitesConfiguration.maximumSites).map { "  - {id: s\($0), zones: [{id: z}]}" }
        #expect(throws: SitesError.self) { try SitesConfiguration.parse("sites:\n" + many.joined(separator: "\n")) }
        do {
            _ = try SitesConfiguration.parse("sites:\n" + many.joined(separator: "\n"), name: "sites.yaml")
        } catch {
            #expect(error.message == "sites.yaml: sites: 10001 entries, more than 10000")
        }
        let fine = try SitesConfiguration.parse("sites:\n" + many.dropLast().joined(separator: "\n"))
        #expect(fine.sites.count == SitesConfiguration.maximumSites)
        let beacons = (0..<50_000).map { "  - {id: \"mac:AA:BB:CC:\(String(format: "%02X:%02X:%02X", $0 >> 16, ($0 >> 8) & 0xFF, $0 & 0xFF))\"}" }
        let duplicated = "sites:\n  - {id: hq, zones: [{id: z}]}\nbeacons:\n" + (beacons + [beacons[0]]).joined(separator: "\n")
        do {
            _ = try SitesConfiguration.parse(duplicated, name: "sites.yaml")
            Issue.record("a beacon twice was accepted")
        } catch {
            #expect(error.message.contains("beacons[50000]: beacon 'mac:AA:BB:CC:00:00:00' appears twice"), "\(error.message)")
        }
    }

    @Test(arguments: [
        ("id: hq", "id: HQ", "sites[0].id must be"),
        ("zone: lab}", "zone: attic}", "zone 'attic', which site 'hq' does not have"),
        ("timezone: Europe/Berlin", "timezone: Mars/Olympus", "unknown timezone 'Mars/Olympus'"),
        ("path_loss_exponent: 2.5", "path_loss_exponent: 9", "outside 1.5-5"),
        ("identity_key: \"000102030405060708090a0b0c0d0e0f\"", "identity_key: \"00\"", "identity_key must be 32 hex digits"),
        ("{id: lobby}, {id: lab", "{id: lobby}, {id: lobby", "zone 'lobby' appears twice"),
        ("rssi_offset_db: 0}", "rssi_ofset_db: 0}", "unknown key 'rssi_ofset_db'"),
        ("path_loss_exponent: 2.5", "path_loss_exponent: 2.5\n    zone_scoring: nearest", "zone_scoring must be one of 'pattern', 'loudest', 'position', not 'nearest'"),
        ("path_loss_exponent: 2.5", "path_loss_exponent: 2.5\n    doors: [[lobby, attic]]", "doors[0]: site 'hq' has no zone 'attic'"),
        ("path_loss_exponent: 2.5", "path_loss_exponent: 2.5\n    doors: [[lobby]]", "doors[0] must be two zones of the site"),
        ("path_loss_exponent: 2.5", "path_loss_exponent: 2.5\n    doors: lobby", "doors must be a list of zone pairs"),
        ("path_loss_exponent: 2.5", "path_loss_exponent: 2.5\n    zone_switch_settled_s: -1", "zone_switch_settled_s must be 0-86400 seconds"),
        ("label: \"cart 7\"", "label: \"cart 7\", eid_rotation_exponent: 16", "eid_rotation_exponent must be an integer from 0 to 15"),
        ("label: \"cart 7\"", "label: \"cart 7\", eid_rotation_exponent: ten", "eid_rotation_exponent must be an integer from 0 to 15"),
        (", identity_key: \"000102030405060708090a0b0c0d0e0f\"", ", eid_rotation_exponent: 10", "eid_rotation_exponent needs the beacon's identity_key"),
        ("label: \"cart 7\"", "label: \"cart 7\", battery: cr2023", "battery must be one of 'cr2032', 'cr2477', '2xaa-lithium', 'unknown'"),
        ("label: \"cart 7\"", "label: \"cart 7\", battery_mah: 0", "battery_mah must be 1-100000"),
        ("label: \"cart 7\"", "label: \"cart 7\", transmit_power_dbm: 30", "transmit_power_dbm must be -40-20"),
        ("label: \"cart 7\"", "label: \"cart 7\", outdoors: \"true\"", "outdoors must be true or false"),
    ])
    func mistakesAreNamed(replace: String, with replacement: String, message: String) {
        let text = valid.replacingOccurrences(of: replace, with: replacement)
        #expect(text != valid)
        do {
            _ = try SitesConfiguration.parse(text, name: "sites.yaml")
            Issue.record("accepted: \(replacement)")
        } catch {
            #expect(error.message.contains(message), "\(error.message)")
            #expect(error.message.hasPrefix("sites.yaml"))
        }
    }
}

@Suite struct BatchIntakeTests {
    let intake = BatchIntake(sites: try! SitesConfiguration.parse(testSites))
    let now: Int64 = 1_767_225_600_000_000

    func reason(_ topic: String, _ payload: [UInt8]) -> String? {
        switch intake.check(topic: topic, payload: payload, nowMicros: now) {
        case .success: nil
        case .failure(let failure): failure.rejection.reason.rawValue
        }
    }

    @Test func aGoodBatchPasses() throws {
        #expect(reason("beaconflow/v1/hq/hq-a1/batch", try batchPayload(sequence: 1, start: now - 60_000_000)) == nil)
    }

    @Test func eachProblemIsNamed() throws {
        let good = try batchPayload(sequence: 1, start: now - 60_000_000)
        #expect(reason("beaconflow/v1/hq/hq-a1/status", good) == "wrong_topic")
        #expect(reason("beaconflow/v2/hq/hq-a1/batch", good) == "wrong_topic")
        #expect(reason("beaconflow/v1/hq/hq-a2/batch", good) == "topic_mismatch")
        #expect(reason("beaconflow/v1/hq/hq-a1/batch", Array(good.dropLast(3))) == "undecodable")
        #expect(reason("beaconflow/v1/hq/hq-a1/batch", try batchPayload(sequence: 1, formatVersion: 4)) == "unsupported_version")
        #expect(reason("beaconflow/v1/hq/hq-a9/batch", try batchPayload(agent: "hq-a9", sequence: 1)) == "unknown_agent")
        // Five minutes ahead is tolerated (clock drift), an hour is not; 1970 means a clock never set.
        #expect(reason("beaconflow/v1/hq/hq-a1/batch", try batchPayload(sequence: 1, count: 1, start: now + 240_000_000)) == nil)
        #expect(reason("beaconflow/v1/hq/hq-a1/batch", try batchPayload(sequence: 1, start: now + 3_600_000_000)) == "bad_timestamp")
        #expect(reason("beaconflow/v1/hq/hq-a1/batch", try batchPayload(sequence: 1, start: 5_000_000)) == "bad_timestamp")
    }

    @Test func aBatchWithBadTimesFromAKnownAgentCanBeAcknowledged() throws {
        let result = intake.check(
            topic: "beaconflow/v1/hq/hq-a1/batch", payload: try batchPayload(sequence: 9, start: 5_000_000), nowMicros: now)
        guard case .failure(let failure) = result else {
            Issue.record("accepted")
            return
        }
        #expect(failure.header?.sequence == 9)
    }

    @Test func aBatchWithAValidHeaderAndAnInvalidBodyCanBeAcknowledged() throws {
        let clockUnset = try batchPayload(sequence: 11, edit: { $0.agentClockUs = .min })
        guard case .failure(let failure) = intake.check(topic: "beaconflow/v1/hq/hq-a1/batch", payload: clockUnset, nowMicros: now)
        else {
            Issue.record("accepted")
            return
        }
        #expect(failure.rejection.reason == .undecodable && failure.header?.sequence == 11)
        // The same body on another agent's topic names nobody that may be acknowledged.
        guard case .failure(let elsewhere) = intake.check(topic: "beaconflow/v1/hq/hq-a2/batch", payload: clockUnset, nowMicros: now)
        else {
            Issue.record("accepted")
            return
        }
        #expect(elsewhere.header == nil)
    }

    @Test func statusesAreCheckedLikeBatches() throws {
        func status(_ json: String) -> String {
            do {
                let parsed = try AgentStatus(json: Array(json.utf8))
                return "online \(parsed.online) \(parsed.advertsPerSecond ?? -1) \(parsed.spoolBytes ?? -1) \(parsed.clockMicros ?? -1)"
            } catch { return "\(error)" }
        }
        #expect(status(#"{"online": true, "adverts_per_s": 12.5, "spool_bytes": 4096, "clock_us": 1767225600000000}"#)
            == "online true 12.5 4096 1767225600000000")
        #expect(status(#"{"online": false}"#) == "online false -1.0 -1 -1")
        #expect(status(#"{"online": true, "adverts_per_s": 1e300}"#).contains("'adverts_per_s' is not a number"))
        #expect(status(#"{"online": true, "clock_us": -9223372036854775808}"#).contains("'clock_us' is not a number"))
        #expect(status(#"{"online": true, "spool_bytes": "lots"}"#).contains("'spool_bytes' is not a number"))
        #expect(status(#"{"online": "yes"}"#) == "status has no boolean 'online'")
        #expect(status("[1, 2]") == "status is not a JSON object")
    }

    /// Sequences go to 2^62, beyond what a double holds exactly: a status at the limit is read to the unit.
    @Test func statusesTakeEverySequenceTheWireTakes() throws {
        let atLimit = try AgentStatus(json: Array(#"{"online": true, "last_sequence": 4611686018427387904, "acknowledged_through": 4611686018427387903}"#.utf8))
        #expect(atLimit.lastSequence == 4_611_686_018_427_387_904 && atLimit.acknowledgedThrough == 4_611_686_018_427_387_903)
        for beyond in ["4611686018427387905", "-1", "1.5", "\"9\""] {
            #expect(throws: AgentStatus.Invalid.self) { try AgentStatus(json: Array(#"{"online": true, "last_sequence": \#(beyond)}"#.utf8)) }
        }
    }
}

@Suite struct TelemetryDeduplicatorTests {
    func tlm(count: UInt32, uptimeSeconds: UInt32, battery: UInt16 = 3000) -> EddystoneTLM {
        EddystoneTLM(batteryMillivolts: battery, temperatureRaw: 0x1880, advertisingCount: count, uptimeTenths: uptimeSeconds * 10)
    }

    @Test func oneTransmissionHeardByThreeAgentsIsOneRow() {
        var dedup = TelemetryDeduplicator()
        let t: Int64 = 1_767_225_600_000_000
        #expect(dedup.observe(beaconID: "b", tlm: tlm(count: 100, uptimeSeconds: 1000), timeMicros: t) == (true, false))
        #expect(dedup.observe(beaconID: "b", tlm: tlm(count: 100, uptimeSeconds: 1000), timeMicros: t + 3_000) == (false, false))
        #expect(dedup.observe(beaconID: "b", tlm: tlm(count: 100, uptimeSeconds: 1000), timeMicros: t - 40_000) == (false, false))
        #expect(dedup.observe(beaconID: "b", tlm: tlm(count: 110, uptimeSeconds: 1010), timeMicros: t + 10_000_000) == (true, false))
        // Another beacon with the same counter is another transmission.
        #expect(dedup.observe(beaconID: "c", tlm: tlm(count: 100, uptimeSeconds: 1000), timeMicros: t) == (true, false))
    }

    @Test func aLaggingAgentIsNoRebootButAResetUptimeIs() {
        var dedup = TelemetryDeduplicator()
        let t: Int64 = 1_767_225_600_000_000
        _ = dedup.observe(beaconID: "b", tlm: tlm(count: 500, uptimeSeconds: 5000), timeMicros: t)
        // Five minutes old, from an agent draining its spool: uptime lower, but the boot time is the same.
        #expect(dedup.observe(beaconID: "b", tlm: tlm(count: 470, uptimeSeconds: 4700), timeMicros: t - 300_000_000) == (true, false))
        #expect(dedup.observe(beaconID: "b", tlm: tlm(count: 470, uptimeSeconds: 4700), timeMicros: t - 300_000_000) == (false, false))
        // Rebooted: counters and uptime restart.
        #expect(dedup.observe(beaconID: "b", tlm: tlm(count: 3, uptimeSeconds: 30), timeMicros: t + 60_000_000) == (true, true))
        #expect(dedup.observe(beaconID: "b", tlm: tlm(count: 3, uptimeSeconds: 30), timeMicros: t + 60_001_000) == (false, false))
    }

    /// One agent replays four minutes ahead of another (TLM every second): the second one's repeats are still
    /// recognised; past the window they no longer are.
    @Test func anAgentLaggingWithinTheWindowAddsNoRows() {
        var dedup = TelemetryDeduplicator()
        let t: Int64 = 1_767_225_600_000_000
        for second in 0..<240 {
            let time = t + Int64(second) * 1_000_000
            #expect(dedup.observe(beaconID: "b", tlm: tlm(count: UInt32(second * 10), uptimeSeconds: 1000 + UInt32(second)), timeMicros: time).new)
        }
        let repeats = (0..<240).filter { second in
            dedup.observe(
                beaconID: "b", tlm: tlm(count: UInt32(second * 10), uptimeSeconds: 1000 + UInt32(second)),
                timeMicros: t + Int64(second) * 1_000_000 + 2_000
            ).new
        }
        #expect(repeats.isEmpty)
        _ = dedup.observe(beaconID: "b", tlm: tlm(count: 4000, uptimeSeconds: 1400), timeMicros: t + 400_000_000)
        #expect(dedup.observe(beaconID: "b", tlm: tlm(count: 0, uptimeSeconds: 1000), timeMicros: t).new)
    }
}

@Suite struct FleetHealthTests {
    let day: Int64 = 86_400_000_000
    let start: Int64 = 1_767_225_600_000_000

    func row(_ time: Int64, _ battery: Int32?) -> TelemetryRow {
        TelemetryRow(
            timeMicros: time, siteID: "hq", agentID: "hq-a1", beaconID: "b", batteryMillivolts: battery,
            temperatureCelsius: 21.5, advertisingCount: UInt32(time / 1_000_000 % 1_000_000), uptimeSeconds: 0)
    }

    /// The trend, as beacons without TLM counters have it.
    var trendOnly: FleetHealth.Configuration {
        var configuration = FleetHealth.Configuration()
        configuration.chargeCounting = false
        return configuration
    }

    @Test func theTrendIsRobustToSagsAndForecastsTheCutoff() throws {
        var straight = trendOnly
        straight.trendOnCurve = false
        var health = FleetHealth(configuration: straight)
        // 3000 mV falling 10 mV a day, a reading every hour for 7 days, every 10th one sagging by 300 mV.
        for hour in 0..<(7 * 24) {
            let time = start + Int64(hour) * 3_600_000_000
            let battery = 3000 - Double(hour) * 10 / 24 - (hour % 10 == 0 ? 300 : 0)
            health.telemetry(row(time, Int32(battery.rounded())), rebooted: false)
        }
        let beacon = try #require(health.health(of: "b"))
        let trend = try #require(beacon.batteryTrendMillivoltsPerDay)
        #expect(abs(trend + 10) < 1, "trend \(trend)")
        // The last reading is ~2930 mV: in a straight line, (2930 − 2000) / 10 ≈ 93 days.
        let days = try #require(beacon.estimatedDaysLeft)
        #expect(abs(days - 93) < 10, "days \(days)")
        #expect(beacon.status == .ok)
        #expect(beacon.temperatureCelsius == 21.5)
    }

    @Test func lowBatteryAndRebootingStates() throws {
        var health = FleetHealth(configuration: trendOnly)
        health.telemetry(row(start, 2150), rebooted: false)
        #expect(health.health(of: "b")?.status == .lowBattery)
        for index in 1...3 { health.telemetry(row(start + Int64(index) * day, 2150), rebooted: true) }
        #expect(health.health(of: "b")?.rebootsIn7Days == 3)
        #expect(health.health(of: "b")?.status == .rebooting)
        // A week later the reboots have aged out.
        health.telemetry(row(start + 12 * day, 2900), rebooted: false)
        #expect(health.health(of: "b")?.rebootsIn7Days == 0)
        #expect(health.health(of: "b")?.status == .ok)
    }

    @Test func changedBeaconsAreReportedOnce() {
        var health = FleetHealth()
        health.seen(ResolvedBeacon(id: "a"), siteID: "hq", timeMicros: start)
        health.seen(ResolvedBeacon(id: "b"), siteID: "hq", timeMicros: start)
        #expect(health.takeChanged().map(\.beaconID) == ["a", "b"])
        #expect(health.takeChanged().isEmpty)
        health.seen(ResolvedBeacon(id: "a"), siteID: "hq", timeMicros: start)  // not newer: nothing changes
        #expect(health.takeChanged().isEmpty)
        health.seen(ResolvedBeacon(id: "a"), siteID: "hq", timeMicros: start - 1)  // older: only the first sighting moves
        #expect(health.takeChanged().map { [$0.firstSeenMicros, $0.lastSeenMicros] } == [[start - 1, start]])
    }
}

/// An agent's clock offset is taken off its batch's times once, when the writer takes the batch: the days its
/// partitions need and the rows stored come from the same event times.
@Suite struct TimedBatchTests {
    @Test func aBatchOfAnAgentThreeSecondsAheadIsStoredAtItsEventTimes() throws {
        var pipeline = IngestPipeline(sites: try SitesConfiguration.parse(testSites))
        let agent = AgentKey(site: "hq", agent: "hq-a1")
        // Just after midnight by the agent's clock, which is 3 s ahead: the event times are the day before.
        let midnight: Int64 = 1_767_225_600_000_000
        for index in 0..<3 {
            let arrival = midnight + Int64(index) * 10_000_000
            pipeline.clocks.observe(agent, agentClockMicros: arrival + 3_000_000, receivedAtMicros: arrival, retained: false)
        }
        let batch = try BatchReader.decode(try batchPayload(sequence: 1, count: 2, start: midnight + 1_000_000))
        let timed = pipeline.timed(batch)
        #expect(timed.sightingTimes == batch.sightings.map { $0.timeMicros - 3_000_000 })
        #expect(timed.days == [midnight / 86_400_000_000 - 1])
        let output = pipeline.apply(timed, nowMicros: midnight + 10_000_000)
        #expect(output.sightings.map(\.timeMicros) == timed.sightingTimes)
    }
}

@Suite struct AgentClocksTests {
    let agent = AgentKey(site: "hq", agent: "hq-a1")
    let start: Int64 = 1_767_225_600_000_000

    @Test func theOffsetIsTheLeastDelayedLiveSampleAndSmallOnesAreNotApplied() {
        var clocks = AgentClocks()
        // The agent's clock is 3 s ahead; status every 10 s, deliveries take 5-200 ms.
        for (index, delay) in [200_000, 5_000, 80_000].enumerated() {
            let arrival = start + Int64(index) * 10_000_000
            clocks.observe(agent, agentClockMicros: arrival - Int64(delay) + 3_000_000, receivedAtMicros: arrival, retained: false)
        }
        #expect(clocks.offset(agent) == 2_995_000)
        let synced = AgentKey(site: "hq", agent: "hq-a2")
        let taken1 = clocks.observe(synced, agentClockMicros: start, receivedAtMicros: start + 20_000, retained: false)
        #expect(!taken1)
        let taken2 = clocks.observe(synced, agentClockMicros: start + 10_000_000, receivedAtMicros: start + 10_020_000, retained: false)
        #expect(taken2)
        #expect(clocks.estimateMicros(synced) == -20_000)
        #expect(clocks.offset(synced) == 0)
    }

    @Test func retainedAndBackloggedStatusMessagesAreNoSamples() {
        var clocks = AgentClocks()
        // After an ingest restart: the retained status, sent 4 s before the subscription.
        let taken3 = clocks.observe(agent, agentClockMicros: start, receivedAtMicros: start + 4_000_000, retained: true)
        #expect(!taken3)
        // The persistent session's backlog: three statuses sent 10 s apart, delivered in one burst.
        for index in 0..<3 {
            let sent = start + Int64(index + 1) * 10_000_000
            let taken4 = clocks.observe(agent, agentClockMicros: sent, receivedAtMicros: start + 35_000_000 + Int64(index) * 1_000, retained: false)
            #expect(!taken4)
        }
        #expect(clocks.estimateMicros(agent) == nil)
        #expect(clocks.offset(agent) == 0)
        // Live again: the first live status follows the burst's last at a different pace; the next one is a sample.
        let taken5 = clocks.observe(agent, agentClockMicros: start + 40_000_000, receivedAtMicros: start + 40_002_000, retained: false)
        #expect(!taken5)
        let taken6 = clocks.observe(agent, agentClockMicros: start + 50_000_000, receivedAtMicros: start + 50_001_000, retained: false)
        #expect(taken6)
        #expect(clocks.estimateMicros(agent) == -1_000)
        #expect(clocks.offset(agent) == 0)
    }

    /// A status older than one already heard (a broker that comes back hands out the one it kept) is stale.
    @Test func anOlderStatusThanOneHeardIsStale() {
        var clocks = AgentClocks()
        let verdicts = [
            clocks.isNewest(agent, statusClockMicros: start),
            clocks.isNewest(agent, statusClockMicros: start + 10_000_000),
            clocks.isNewest(agent, statusClockMicros: start + 5_000_000),
            clocks.isNewest(agent, statusClockMicros: start + 10_000_000),  // the same one again
            clocks.isNewest(AgentKey(site: "hq", agent: "hq-a2"), statusClockMicros: start),
        ]
        #expect(verdicts == [true, true, false, true, true])
    }

    @Test func anAgentRestartOrExtremeClocksAreNoSamples() {
        var clocks = AgentClocks()
        let taken7 = clocks.observe(agent, agentClockMicros: .max, receivedAtMicros: .min, retained: false)
        #expect(!taken7)
        let taken8 = clocks.observe(agent, agentClockMicros: .min, receivedAtMicros: .max, retained: false)
        #expect(!taken8)
        // The agent restarted with its clock set back: the pace does not match.
        clocks.observe(agent, agentClockMicros: start, receivedAtMicros: start, retained: false)
        let taken9 = clocks.observe(agent, agentClockMicros: start - 60_000_000, receivedAtMicros: start + 10_000_000, retained: false)
        #expect(!taken9)
        #expect(clocks.estimateMicros(agent) == nil)
    }
}

@Suite struct PipelineTransactionTests {
    let sites = try! SitesConfiguration.parse(testSites)
    let start: Int64 = 1_767_225_600_000_000
    let beaconX = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2"
    let beaconY = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:3"

    func batch(agent: String, sequence: UInt64, beacon: String, at offset: Int64) throws -> DecodedBatch {
        let payload = try batchPayload(agent: agent, sequence: sequence, beaconID: beacon, count: 20, start: start + offset)
        return try BatchIntake(sites: sites).check(
            topic: "beaconflow/v1/hq/\(agent)/batch", payload: payload, nowMicros: start + 3_600_000_000
        ).get()
    }

    /// A rolled-back transaction leaves no trace: the next batch gives the same rows, distances and zone changes
    /// as on a pipeline that never saw the rolled-back batches.
    @Test func aRolledBackTransactionLeavesNoTrace() throws {
        let now = start + 3_600_000_000
        var undone = IngestPipeline(sites: sites)
        var untouched = IngestPipeline(sites: sites)
        let first = try batch(agent: "hq-a1", sequence: 1, beacon: beaconX, at: 0)
        _ = undone.apply(first, nowMicros: now)
        _ = untouched.apply(first, nowMicros: now)
        _ = undone.health.takeChanged()
        _ = untouched.health.takeChanged()
        undone.beginTransaction()
        _ = undone.apply(try batch(agent: "hq-a1", sequence: 2, beacon: beaconX, at: 20_000_000), nowMicros: now)
        _ = undone.apply(try batch(agent: "hq-a2", sequence: 1, beacon: beaconY, at: 5_000_000), nowMicros: now)
        #expect(undone.proximity.trackedPairs == 2 && undone.health.trackedBeacons == 2)
        undone.rollbackTransaction()
        #expect(undone.proximity.trackedPairs == 1 && undone.health.trackedBeacons == 1)

        let next = try batch(agent: "hq-a2", sequence: 1, beacon: beaconX, at: 3_000_000)
        undone.beginTransaction()
        let replayed = undone.apply(next, nowMicros: now)
        undone.commitTransaction()
        let reference = untouched.apply(next, nowMicros: now)
        #expect(replayed.sightings == reference.sightings)
        #expect(replayed.zoneChanges == reference.zoneChanges)
        #expect(undone.health.takeChanged() == untouched.health.takeChanged())
        #expect(undone.zoneTrackers["hq"]?.pendingReadings == untouched.zoneTrackers["hq"]?.pendingReadings)
        #expect(undone.zoneTrackers["hq"]?.watermarkMicros == untouched.zoneTrackers["hq"]?.watermarkMicros)
    }

    /// A rolled-back transaction forgets the EIDs it resolved but keeps the candidates it computed for the identity
    /// keys (a cache, journaled as one): the batch tried again resolves the same, with nothing computed anew.
    @Test func aRolledBackTransactionKeepsTheEIDsComputedForTheKeys() throws {
        let key: [UInt8] = Array(0..<16)
        let tag = "eddystone:0102030405060708090a:0000000000b9"
        var registered = sites
        registered.beacons = [SitesConfiguration.Beacon(id: tag, identityKey: key)]
        let eid = EddystoneKeyring.eid(identityKey: key, rotationExponent: 10, beaconTime: UInt32(start / 1_000_000))
        let beaconID = "eid:" + String(format: "%016llx", eid)
        let payload = try batchPayload(sequence: 1, beaconID: beaconID, count: 5, start: start)
        let heard = try BatchIntake(sites: registered).check(
            topic: "beaconflow/v1/hq/hq-a1/batch", payload: payload, nowMicros: start + 60_000_000
        ).get()
        var pipeline = IngestPipeline(sites: registered)
        pipeline.beginTransaction()
        #expect(pipeline.apply(heard, nowMicros: start + 60_000_000).sightings.map(\.beaconID) == Array(repeating: tag, count: 5))
        let computed = pipeline.eids.computedEIDs
        #expect(computed.count > 0)
        pipeline.rollbackTransaction()
        #expect(pipeline.eids.computedEIDs.count == computed.count && pipeline.eids.computedEIDs.covered == computed.covered)
        pipeline.beginTransaction()
        #expect(pipeline.apply(heard, nowMicros: start + 60_000_000).sightings.map(\.beaconID) == Array(repeating: tag, count: 5))
        pipeline.commitTransaction()
        #expect(pipeline.eids.computedEIDs.count == computed.count && pipeline.eids.computedEIDs.covered == computed.covered)
    }
}

@Suite struct BeaconBoundTests {
    /// 30,000 distinct ids (each with a TLM frame) through a pipeline bounded at 1,000 beacons: the per-beacon tables
    /// stay within the bound, the evictions are counted, and the beacons heard last are the ones kept.
    /// (Seconds of computation: on a thread of its own, not the few threads of the cooperative pool.)
    @Test func randomBeaconIdsCannotGrowThePipelineWithoutBound() async throws {
        let sites = try SitesConfiguration.parse(testSites)
        let start: Int64 = 1_767_225_600_000_000
        let (pipeline, evicted, mostTracked) = try await onThread {
            var pipeline = IngestPipeline(sites: sites)
            pipeline.maximumBeacons = 1_000
            var evicted = 0
            var mostTracked = 0
            for batchIndex in 0..<30 {
                var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 1)
                builder.configuration.maximumSightings = 10_000
                for index in 0..<1_000 {
                    let number = batchIndex * 1_000 + index
                    let key = BeaconKey(
                        beaconID: "eddystone:0102030405060708090a:\(hexString(UInt64(number), digits: 12))", address: UInt64(number) + 1,
                        addressIsRandom: true, powerAt1mDbm: -59)
                    let tlm = EddystoneTLM(batteryMillivolts: 3000, temperatureRaw: 0, advertisingCount: 1, uptimeTenths: 10)
                    _ = builder.add(
                        Sighting(timeMicros: start + Int64(number) * 1_000, beacon: key, rssi: -60, data: .eddystone(FrameBytes([0x20, 0x00] + tlm.fieldBytes))),
                        nowNanoseconds: 0)
                }
                let sealed = builder.seal(sequence: UInt64(batchIndex + 1), firstUnacknowledgedSequence: 1, agentClockMicros: start)
                guard let wire = sealed else { throw BatchBoundError.notSealed }
                let output = pipeline.apply(try BatchReader.decode(try wire.wireBytes()), nowMicros: start + 60_000_000)
                pipeline.telemetryStored(output.telemetry)
                evicted += output.evictedBeacons
                mostTracked = max(mostTracked, pipeline.health.trackedBeacons, pipeline.telemetry.trackedBeacons)
            }
            return (pipeline, evicted, mostTracked)
        }
        #expect(mostTracked <= 1_000)
        #expect(evicted >= 29_000)
        #expect(pipeline.health.health(of: "eddystone:0102030405060708090a:\(hexString(29_999, digits: 12))") != nil)
        #expect(pipeline.health.health(of: "eddystone:0102030405060708090a:\(hexString(0, digits: 12))") == nil)
    }

    private enum BatchBoundError: Error { case notSealed }
}

@Suite struct IntervalLimiterTests {
    @Test func onePerKeyPerIntervalWithinCapacity() {
        var limiter = IntervalLimiter(interval: .seconds(10), capacity: 2)
        let start = ContinuousClock.now
        func passes(_ key: String, after seconds: Int) -> Bool { limiter.isDue(key, now: start + .seconds(seconds)) }
        #expect(passes("a", after: 0))
        #expect(!passes("a", after: 9))
        #expect(passes("a", after: 10))
        #expect(passes("b", after: 10))
        // Full with two recent keys: a third waits; once they are quiet for an interval, it passes.
        #expect(!passes("c", after: 11))
        #expect(passes("c", after: 21))
    }
}

@Suite struct AgentProgressTests {
    /// An agent's batch that arrives past a gap in its sequences holds the agent's progress: the site's watermark
    /// stays where the gap begins until the missing batch comes, whose readings then move zones, not count late.
    @Test func progressPastAGapWaitsForTheMissingBatch() throws {
        let sites = try SitesConfiguration.parse(testSites)
        var pipeline = IngestPipeline(sites: sites)
        let start: Int64 = 1_767_225_600_000_000
        func batch(_ agent: String, from second: Int64) throws -> DecodedBatch {
            var builder = BatchBuilder(siteID: "hq", agentID: agent, bootID: 1)
            let key = BeaconKey(beaconID: "eddystone:0102030405060708090a:0000000000a1", address: 1, addressIsRandom: true, powerAt1mDbm: -59)
            for index in 0..<10 {
                _ = builder.add(Sighting(timeMicros: start + (second + Int64(index)) * 1_000_000, beacon: key, rssi: -60), nowNanoseconds: 0)
            }
            let sealed = builder.seal(sequence: 1, firstUnacknowledgedSequence: 1, agentClockMicros: start)
            return try BatchReader.decode(try #require(sealed).wireBytes())
        }
        let now = start + 100_000_000
        _ = pipeline.apply(try batch("hq-a1", from: 0), nowMicros: now)
        _ = pipeline.apply(try batch("hq-a2", from: 0), nowMicros: now)
        #expect(pipeline.zoneTrackers["hq"]?.watermarkMicros == start + 9_000_000)
        // hq-a1's batch of seconds 20-29 arrives before its batch of 10-19.
        _ = pipeline.apply(try batch("hq-a1", from: 20), nowMicros: now, inOrder: false)
        _ = pipeline.apply(try batch("hq-a2", from: 10), nowMicros: now)
        _ = pipeline.apply(try batch("hq-a2", from: 20), nowMicros: now)
        #expect(pipeline.zoneTrackers["hq"]?.watermarkMicros == start + 9_000_000)
        _ = pipeline.apply(try batch("hq-a1", from: 10), nowMicros: now)
        #expect(pipeline.zoneTrackers["hq"]?.watermarkMicros == start + 29_000_000)
        #expect(pipeline.zoneTrackers["hq"]?.lateReadings == 0)
    }
}
