import BeaconIngest
import Testing

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
    }

    @Test(arguments: [
        ("id: hq", "id: HQ", "sites[0].id must be"),
        ("zone: lab}", "zone: attic}", "zone 'attic', which site 'hq' does not have"),
        ("timezone: Europe/Berlin", "timezone: Mars/Olympus", "unknown timezone 'Mars/Olympus'"),
        ("path_loss_exponent: 2.5", "path_loss_exponent: 9", "outside 1.5-5"),
        ("identity_key: \"000102030405060708090a0b0c0d0e0f\"", "identity_key: \"00\"", "identity_key must be 32 hex digits"),
        ("{id: lobby}, {id: lab", "{id: lobby}, {id: lobby", "zone 'lobby' appears twice"),
        ("rssi_offset_db: 0}", "rssi_ofset_db: 0}", "unknown key 'rssi_ofset_db'"),
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
