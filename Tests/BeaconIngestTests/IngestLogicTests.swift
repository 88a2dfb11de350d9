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
