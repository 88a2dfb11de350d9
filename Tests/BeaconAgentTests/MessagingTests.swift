import BeaconMessaging
import Foundation
import Mosquitto
import Testing

/// The contract between agent and ingest: topics, messages, and the broker settings built from an address.
@Suite struct MessagingTests {
    @Test func topicsAreBuiltAndParsedOneWay() {
        let topics = AgentTopics(site: "hq", agent: "hq-a1")
        #expect(
            [topics.batch, topics.status, topics.ack, topics.rejection] == [
                "beaconflow/v1/hq/hq-a1/batch", "beaconflow/v1/hq/hq-a1/status", "beaconflow/v1/hq/hq-a1/ack",
                "beaconflow/v1/hq/hq-a1/rejection",
            ])
        for kind in AgentTopicKind.allCases {
            #expect(AgentTopics(parsing: topics.topic(kind), kind: kind) == topics)
        }
        #expect(AgentTopics(parsing: topics.batch, kind: .status) == nil)
        for bad in ["beaconflow/v2/hq/hq-a1/batch", "beaconflow/v1/hq/Bad/batch", "beaconflow/v1/hq/hq-a1/batch/x", "beaconflow/v1//hq-a1/batch"] {
            #expect(AgentTopics(parsing: bad, kind: .batch) == nil, "\(bad)")
        }
        #expect(AgentTopics.siteFilter(site: "hq", kind: .status) == "beaconflow/v1/hq/+/status")
    }

    /// What the agent publishes is what the ingest reads back, every field; `last_error` is null when none.
    @Test func anAgentsStatusReadsBackWhole() throws {
        var status = AgentStatus(online: true)
        status.siteID = "hq"
        status.agentID = "hq-a1"
        status.bootID = "00000000000000ff"
        status.clockMicros = 1_767_225_600_000_000
        status.uptimeSeconds = 12.5
        status.advertsPerSecond = 41.3
        (status.sightings, status.batches, status.lastSequence, status.acknowledgedThrough) = (900, 12, 12, 11)
        (status.spoolBatches, status.spoolBytes, status.droppedBatches, status.refusedBatches) = (1, 2048, 0, 3)
        #expect(try AgentStatus(json: status.payload) == status)
        let text = String(decoding: status.payload, as: UTF8.self)
        #expect(text.contains(#""last_error":null"#) && text.contains(#""adverts_per_s":41.3"#), "\(text)")
        status.lastError = "the ingest refused batch 4 (unknown_agent): ..."
        #expect(try AgentStatus(json: status.payload) == status)
        // A will names only what it knows.
        var will = AgentStatus(online: false)
        will.lastError = "connection lost"
        #expect(String(decoding: will.payload, as: UTF8.self) == #"{"last_error":"connection lost","online":false}"#)
    }

    @Test func statusFieldsAreChecked() {
        func problem(_ json: String) -> String {
            do {
                _ = try AgentStatus(json: Array(json.utf8))
                return "accepted"
            } catch { return error.description }
        }
        #expect(problem(#"{"online": true, "sightings": -1}"#).contains("'sightings' is not a number"))
        #expect(problem(#"{"online": true, "site_id": 7}"#) == "status field 'site_id' is not a string")
        #expect(problem(#"{"online": true, "last_error": null, "future_field": [1]}"#) == "accepted")
        #expect(problem(String(repeating: " ", count: 70_000)).hasPrefix("status is 70000 bytes"))
    }

    @Test func rejectionNoticesReadBackAndBoundWhatTheySay() throws {
        let notice = RejectionNotice(
            sequence: 7, rejection: Rejection(.unknownAgent, "the sites file has no agent 'x' in site 'hq'"), acknowledged: false)
        #expect(
            String(decoding: notice.payload, as: UTF8.self)
                == #"{"acknowledged":false,"detail":"the sites file has no agent 'x' in site 'hq'","reason":"unknown_agent","sequence":7}"#)
        #expect(RejectionNotice(payload: notice.payload) == notice)
        #expect(notice.reasonLabel == "unknown_agent")
        // A reason from a newer ingest is kept as text, and counted under a bounded label.
        let newer = try #require(RejectionNotice(payload: Array(#"{"reason": "quota", "detail": "d", "acknowledged": true}"#.utf8)))
        #expect(newer.reason == "quota" && newer.reasonLabel == "other" && newer.sequence == nil)
        let long = RejectionNotice(sequence: nil, rejection: Rejection(.undecodable, String(repeating: "x", count: 5000)), acknowledged: true)
        #expect(long.detail.count == 1000)
        #expect(RejectionNotice(payload: Array(String(repeating: "x", count: 5000).utf8)) == nil)
        #expect(RejectionNotice(payload: Array(#"{"reason": "x"}"#.utf8)) == nil)
    }

    @Test func acknowledgementsReadBack() {
        #expect(Acknowledgement(payload: Acknowledgement(committedThrough: 81_233).payload)?.committedThrough == 81_233)
        #expect(Acknowledgement(payload: Array(#"{"committed_through": 5}"#.utf8))?.committedThrough == 5)
        #expect(Acknowledgement(payload: Array(#"{"committed_through": -5}"#.utf8)) == nil)
    }

    @Test func brokerSettingsComeFromTheAddressAndTheTLSFiles() throws {
        var address = try BrokerAddress(url: "mqtts://hq%2Fhq-a1:secret@broker.example:8884")
        let tls = try address.tls(caFile: "/ca.pem", certificateFile: nil, keyFile: nil)
        let configuration = address.clientConfiguration(clientID: "c", tls: tls)
        #expect(configuration.host == "broker.example" && configuration.port == 8884 && configuration.clientID == "c")
        #expect(configuration.username == "hq/hq-a1" && configuration.password == "secret" && configuration.tls?.caFile == "/ca.pem")
        #expect(try address.tls(caFile: nil, certificateFile: nil, keyFile: nil) != nil, "mqtts uses the system's CAs")
        address = try BrokerAddress(url: "mqtt://127.0.0.1")
        let plain = try address.tls(caFile: nil, certificateFile: nil, keyFile: nil)
        #expect(address.port == 1883 && plain == nil)
        #expect(throws: ConfigurationError.self) { try address.tls(caFile: "/ca.pem", certificateFile: nil, keyFile: nil) }
    }

    /// Several brokers serve one deployment only with one scheme and one user, each once.
    @Test func brokersOfOneDeploymentShareSchemeAndUser() throws {
        func problem(_ urls: [String]) throws -> String? {
            do {
                try BrokerAddress.checkDeployment(try urls.map { try BrokerAddress(url: $0) })
                return nil
            } catch let error as ConfigurationError { return error.message }
        }
        #expect(try problem(["mqtt://mq1:1883", "mqtt://mq2:1883"]) == nil)
        #expect(try problem(["mqtt://mq1", "mqtts://mq2"]) == "the brokers mix mqtt:// and mqtts://; give them all the same scheme")
        #expect(try problem(["mqtt://a@mq1", "mqtt://b@mq2"]) == "the brokers' URLs name different users or passwords; give them all the same")
        #expect(try problem(["mqtt://mq1", "mqtt://mq1:1883"]) == "a broker is given twice")
        #expect(try problem([]) == "no broker given")
    }

    /// One broker under two names (an address and a host name, or two host names) is refused: its two connections
    /// would share a client id and take each other's place forever.
    @Test func oneBrokerUnderTwoNamesIsRefused() throws {
        func problem(_ urls: [String], resolve: @escaping (String) -> [String] = BrokerAddress.resolvedAddresses(of:)) throws -> String? {
            do {
                try BrokerAddress.checkDeployment(try urls.map { try BrokerAddress(url: $0) }, resolve: resolve)
                return nil
            } catch let error as ConfigurationError { return error.message }
        }
        #expect(BrokerAddress.resolvedAddresses(of: "127.0.0.1") == ["127.0.0.1"])
        #expect(BrokerAddress.resolvedAddresses(of: "localhost").contains { $0 == "127.0.0.1" || $0 == "::1" })
        #expect(BrokerAddress.resolvedAddresses(of: "no-such-host.invalid").isEmpty)
        let localhost = BrokerAddress.resolvedAddresses(of: "localhost")
        if localhost.contains("127.0.0.1") {
            #expect(try problem(["mqtt://127.0.0.1:1883", "mqtt://localhost:1883"])
                == "mqtt://127.0.0.1:1883 and mqtt://localhost:1883 are one broker (both reach 127.0.0.1 port 1883): give it once")
        }
        // An IPv4-mapped IPv6 address, in any spelling, is the IPv4 address it maps.
        for mapped in ["[::ffff:127.0.0.1]", "[0:0:0:0:0:ffff:7f00:1]", "[::FFFF:7F00:1]"] {
            #expect(try problem(["mqtt://127.0.0.1:1883", "mqtt://\(mapped):1883"])?.contains("are one broker (both reach 127.0.0.1 port 1883)") == true, "\(mapped)")
        }
        #expect(try problem(["mqtt://[::1]:1883", "mqtt://127.0.0.1:1883"]) == nil)
        // The same address on other ports is another broker; names that do not resolve are compared by name.
        #expect(try problem(["mqtt://127.0.0.1:1883", "mqtt://localhost:1884"]) == nil)
        #expect(try problem(["mqtt://mq1.invalid", "mqtt://mq2.invalid"]) == nil)
        let table = ["mq1": ["10.0.0.5"], "mq2": ["10.0.0.6"], "mq-alias": ["10.0.0.5", "fd00::5"]]
        #expect(try problem(["mqtt://mq1", "mqtt://mq2"]) { table[$0] ?? [] } == nil)
        #expect(try problem(["mqtt://mq1", "mqtt://mq-alias"]) { table[$0] ?? [] }?.contains("are one broker") == true)
    }
}
