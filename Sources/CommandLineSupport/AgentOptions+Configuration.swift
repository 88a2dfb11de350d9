import ArgumentParser
import BeaconAgent
import BeaconMessaging
import BeaconWire
import Foundation
import Logging
import Mosquitto

/// What the agent's options make: its configuration, its source and its GATT poller. Defaults are applied
/// here; an option left out (on the command line and in the `--config` file) is nil.
extension AgentOptions {
    /// The checks that need no file: ranges of the numeric options.
    public func validate() throws {
        func check(_ value: Int?, _ range: ClosedRange<Int>, _ name: String) throws {
            if let value, !range.contains(value) {
                throw ValidationError("\(name) must be \(range.lowerBound)-\(range.upperBound), not \(value)")
            }
        }
        try check(spoolMaxMb, 1...1_048_576, "spool_max_mb")
        try check(batchMaxSightings, 1...BatchReader.maximumSightings, "batch_max_sightings")
        try check(batchMaxAgeMs, 10...600_000, "batch_max_age_ms")
        try check(wireFormat, Int(BatchReader.formatVersions.lowerBound)...Int(BatchReader.formatVersions.upperBound), "wire_format")
        try check(maxInFlight, 1...1000, "max_in_flight")
        try check(ackTimeout, 1...86_400, "ack_timeout")
        try check(drainTimeout, 0...86_400, "drain_timeout")
        if let gattPollHours, !(gattPollHours > 0 && gattPollHours <= 720) {
            throw ValidationError("gatt_poll_hours must be more than 0, at most 720, not \(gattPollHours)")
        }
    }

    func agentConfiguration() throws(ConfigurationError) -> AgentConfiguration {
        guard let site, let agent else { throw ConfigurationError("--site and --agent are required (or in --config)") }
        let broker = try brokerOptions.resolve(defaultUser: "\(site)/\(agent)")
        var configuration = try AgentConfiguration(
            siteID: site, agentID: agent, broker: broker.address,
            spoolDirectory: spool ?? ".beaconflow/spool/\(site)-\(agent)")
        configuration.tls = broker.tls
        configuration.failoverBrokers = broker.failover
        configuration.spool.maximumBytes = (spoolMaxMb ?? 256) << 20
        configuration.spool.segmentBytes = min(4 << 20, max(64 << 10, configuration.spool.maximumBytes / 8))
        configuration.spool.fsync = (fsync ?? .always).policy
        let batchMaxSightings = batchMaxSightings ?? 1000
        let batchMaxAgeMs = batchMaxAgeMs ?? 1000
        let maxInFlight = maxInFlight ?? 16
        let ackTimeout = ackTimeout ?? 30
        let drainTimeout = drainTimeout ?? 30
        configuration.batch.maximumSightings = batchMaxSightings
        configuration.batch.maximumAgeNanoseconds = UInt64(batchMaxAgeMs) * 1_000_000
        configuration.batch.formatVersion = wireFormat.map(UInt32.init) ?? BatchReader.formatVersion
        configuration.maximumInFlight = maxInFlight
        configuration.acknowledgementTimeout = .seconds(ackTimeout)
        configuration.drainTimeout = .seconds(drainTimeout)
        configuration.replayFromStart = replayFromStart
        configuration.extractor.allow = allow
        configuration.extractor.deny = deny
        configuration.extractor.includeUnknownDevices = includeUnknownDevices ?? false
        configuration.extractor.includePrivateAddresses = privateAddresses ?? false
        if let pseudonymKeyFile {
            guard let text = try? String(contentsOfFile: pseudonymKeyFile, encoding: .utf8),
                let key = try? [UInt8](hex: text.trimmingCharacters(in: .whitespacesAndNewlines)), key.count >= 16
            else {
                throw ConfigurationError("the pseudonym key file must hold at least 16 bytes in hex")
            }
            configuration.extractor.pseudonymKey = key
        }
        return configuration
    }

    /// The GATT poll of `gatt_poll` devices (`AA:BB:CC:DD:EE:FF`, `/random` for a random address), if any.
    func makeGATTPoller(logger: Logger) throws(ConfigurationError) -> GATTPoller? {
        guard !gattPoll.isEmpty else { return nil }
        let hours = gattPollHours ?? 6
        var targets: [DeviceAddress] = []
        for text in gattPoll {
            let random = text.hasSuffix("/random")
            let bare = random ? String(text.dropLast("/random".count)) : text
            guard let address = DeviceAddress(bare, kind: random ? .random : .public) else {
                throw ConfigurationError("gatt_poll address '\(text)' is not AA:BB:CC:DD:EE:FF[/random]")
            }
            targets.append(address)
        }
        var poller = GATTPoller(targets: targets, interval: .seconds(hours * 3600), logger: logger)
        if let gattTimeout {
            guard (1...30).contains(gattTimeout) else { throw ConfigurationError("gatt_timeout must be 1-30 seconds, not \(gattTimeout)") }
            poller.requestTimeout = .seconds(gattTimeout)
        }
        if let gattRetry {
            guard (1...86_400).contains(gattRetry) else { throw ConfigurationError("gatt_retry must be 1-86400 seconds, not \(gattRetry)") }
            poller.retryAfterFailure = .seconds(gattRetry)
        }
        for text in gattRead {
            let digits = text.lowercased().hasPrefix("0x") ? String(text.dropFirst(2)) : text
            guard digits.count == 4, let uuid = UInt16(digits, radix: 16) else {
                throw ConfigurationError("gatt_read '\(text)' is not a 16-bit characteristic UUID such as 2A6E")
            }
            poller.extraCharacteristics.insert(uuid)
        }
        return poller
    }

    func makeSource(logger: Logger, extra: ExtraSourceKind?) throws(ConfigurationError) -> any AdvertSource {
        guard let source else { throw ConfigurationError("--source is required (or source: in --config)") }
        let known = ["hci:hciN", "btsnoop:PATH", "pcap:PATH", "recording:PATH"] + (extra.map { ["\($0.kind):\($0.argument)"] } ?? [])
        let kinds = known.dropLast().joined(separator: ", ") + " or " + known[known.count - 1]
        guard let colon = source.firstIndex(of: ":") else { throw ConfigurationError("source must be \(kinds), not '\(source)'") }
        let kind = source[..<colon]
        let argument = String(source[source.index(after: colon)...])
        let replaySpeed = speed ?? .factor(1)
        if let extra, kind == extra.kind {
            guard !argument.isEmpty else { throw ConfigurationError("source \(kind): needs its \(extra.argument)") }
            guard let site, let agent else { throw ConfigurationError("--site and --agent are required") }
            return try extra.make(argument, site, agent, replaySpeed)
        }
        switch kind {
        case "btsnoop", "pcap":
            guard !argument.isEmpty else { throw ConfigurationError("source \(kind): needs a file path") }
            return CaptureReplaySource(path: argument, speed: replaySpeed)
        case "recording":
            guard !argument.isEmpty else { throw ConfigurationError("source recording: needs a file path") }
            guard let agent else { throw ConfigurationError("--agent is required: a recording is replayed as the receiver of that id") }
            return RecordingReplaySource(path: argument, receiver: agent, speed: replaySpeed, logger: logger)
        case "hci":
            var hci = HCIScanSource(
                device: argument,
                parameters: try ScanParameters(
                    active: active ?? false, intervalMilliseconds: scanIntervalMs ?? 100,
                    windowMilliseconds: scanWindowMs ?? 100),
                logger: logger)
            let watchdog = watchdog ?? 60
            guard watchdog >= 1 else { throw ConfigurationError("watchdog must be at least 1 second") }
            hci.watchdogTimeout = .seconds(watchdog)
            hci.recordPath = record
            return hci
        default:
            throw ConfigurationError("source kind '\(kind)' is not one of \(kinds)")
        }
    }
}

/// A kind of source beyond hci, btsnoop and pcap, made by the command that knows it (the simulator's `sim:` in
/// `beaconflow agent`).
public struct ExtraSourceKind: Sendable {
    /// What comes before the colon: `sim`.
    public var kind: String
    /// What comes after it, as the help writes it: `SCENARIO`.
    public var argument: String
    /// Makes the source for an argument, site, agent and replay speed.
    public typealias Make = @Sendable (_ argument: String, _ site: String, _ agent: String, _ speed: ReplaySpeed) throws(ConfigurationError) -> any AdvertSource
    public var make: Make

    public init(kind: String, argument: String, make: @escaping Make) {
        self.kind = kind
        self.argument = argument
        self.make = make
    }
}
