import Deflate
import Foundation
import SwiftProtobuf

/// Why a batch was refused.
public struct BatchError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Not a protobuf message.
        public static let malformed = Code(rawValue: "malformed_batch")
        public static let unsupportedVersion = Code(rawValue: "unsupported_version")
        public static let tooLarge = Code(rawValue: "batch_too_large")
        /// A required field is empty or out of range (names the field).
        public static let invalidField = Code(rawValue: "invalid_field")
        /// Sighting columns of different lengths, or an index that points nowhere.
        public static let inconsistentColumns = Code(rawValue: "inconsistent_columns")
    }

    public var code: Code
    public var message: String
    /// The batch's header, when it was valid and only the rest of the batch is not: the ingest can still
    /// acknowledge the batch as refused, so that its agent moves on.
    public var header: BatchHeader?

    public init(_ code: Code, _ message: String, header: BatchHeader? = nil) {
        self.code = code
        self.message = message
        self.header = header
    }

    public var description: String { "\(code): \(message)" }
}

/// What names a batch and its place in its agent's delivery.
public struct BatchHeader: Hashable, Sendable {
    public var siteID: String
    public var agentID: String
    public var bootID: UInt64
    public var sequence: UInt64
    public var firstUnacknowledgedSequence: UInt64

    public init(siteID: String, agentID: String, bootID: UInt64, sequence: UInt64, firstUnacknowledgedSequence: UInt64) {
        self.siteID = siteID
        self.agentID = agentID
        self.bootID = bootID
        self.sequence = sequence
        self.firstUnacknowledgedSequence = firstUnacknowledgedSequence
    }
}

/// A validated batch with its sightings expanded: absolute times, beacons resolved, RSSI in dBm.
public struct DecodedBatch: Sendable {
    public var siteID: String
    public var agentID: String
    public var bootID: UInt64
    public var sequence: UInt64
    public var firstUnacknowledgedSequence: UInt64
    public var agentClockMicros: Int64
    public var sightings: [Sighting]
    public var characteristicReads: [CharacteristicRead]
    /// The entries of the batch's beacon dictionary: the distinct beacons it holds, at most.
    public var beaconEntries: Int

    /// `beaconEntries`: nil counts one per sighting and read (an upper bound).
    public init(
        siteID: String, agentID: String, bootID: UInt64, sequence: UInt64, firstUnacknowledgedSequence: UInt64,
        agentClockMicros: Int64, sightings: [Sighting], characteristicReads: [CharacteristicRead] = [], beaconEntries: Int? = nil
    ) {
        self.beaconEntries = beaconEntries ?? (sightings.count + characteristicReads.count)
        self.siteID = siteID
        self.agentID = agentID
        self.bootID = bootID
        self.sequence = sequence
        self.firstUnacknowledgedSequence = firstUnacknowledgedSequence
        self.agentClockMicros = agentClockMicros
        self.sightings = sightings
        self.characteristicReads = characteristicReads
    }

    public var header: BatchHeader {
        BatchHeader(
            siteID: siteID, agentID: agentID, bootID: bootID, sequence: sequence,
            firstUnacknowledgedSequence: firstUnacknowledgedSequence)
    }
}

/// A characteristic value read over a GATT connection (the agent's poll of listed devices).
public struct CharacteristicRead: Hashable, Sendable {
    public var beacon: BeaconKey
    /// When the read completed, Unix microseconds.
    public var timeMicros: Int64
    public var characteristic: UInt16
    public var value: [UInt8]

    public init(beacon: BeaconKey, timeMicros: Int64, characteristic: UInt16, value: [UInt8]) {
        self.beacon = beacon
        self.timeMicros = timeMicros
        self.characteristic = characteristic
        self.value = value
    }
}

/// Parses and validates batches: everything a batch claims is checked before any of it is used.
public enum BatchReader {
    /// The format versions read: 1 carries the body directly, 2 compressed, 3 compressed with its time deltas in
    /// the unit it names (proto/beaconflow/v1/batch.proto).
    public static let formatVersions: ClosedRange<UInt32> = 1...3
    /// What agents send unless told otherwise.
    public static let formatVersion: UInt32 = 3
    /// How recently an agent must have sent an address to leave it out of a version 3 batch (`address_as_before`),
    /// µs of batch base time; it leaves it out only when no other address was heard for that id over twice this.
    public static let addressAsBeforeMicros: Int64 = 60_000_000
    /// The unit of time deltas a version 3 batch may name, µs: from a microsecond to a second.
    public static let timeUnits: ClosedRange<UInt32> = 1...1_000_000
    /// Sighting RSSI is sent as RSSI + 128 (proto/beaconflow/v1/batch.proto).
    static let rssiBias: Int32 = 128
    /// The largest batch accepted, and the most a version 2 body may inflate to; the agent's default batches are far
    /// smaller (1000 sightings ≈ 5 kB, 10 kB inflated).
    public static let maximumBytes = 1 << 20
    /// The widest span of capture time one batch may cover (a day), against corrupt deltas.
    public static let maximumSpanMicros: UInt64 = 86_400_000_000
    /// Times on the wire (Unix µs) lie from 1970 to 2200-01-01: sums and differences of any two stay far from
    /// Int64's limits.
    public static let latestMicros: Int64 = 7_258_118_400_000_000
    /// Sequences run from 1 to 2^62: an agent sealing a thousand batches a second takes 146 million years to get
    /// there, and one past any sequence still fits PostgreSQL's bigint.
    public static let maximumSequence: UInt64 = 1 << 62
    /// The most sightings one batch may hold once inflated: the agent's largest `--batch-max-sightings`. A few
    /// kilobytes of DEFLATE can otherwise stand for hundreds of thousands of sightings and hold the ingest's single
    /// writer for every site.
    public static let maximumSightings = 100_000
    /// The most data frames (at most one per sighting and frame kind an advertisement carries) and GATT reads.
    public static let maximumDataFrames = 3 * maximumSightings
    public static let maximumCharacteristicReads = 10_000
    /// The RSSI a radio can report, dBm (HCI: -127 to +20; 127 means "not available" and is never sent).
    public static let rssiRange: ClosedRange<Int8> = -127...20

    /// Whether a time lies in the range the wire allows.
    public static func isValidTime(_ micros: Int64) -> Bool { (0...latestMicros).contains(micros) }

    public static func decode(_ bytes: [UInt8]) throws(BatchError) -> DecodedBatch {
        guard bytes.count <= maximumBytes else {
            throw BatchError(.tooLarge, "batch is \(bytes.count) bytes, the limit is \(maximumBytes)")
        }
        let wire: WireBatch
        do {
            wire = try WireBatch(serializedBytes: bytes)
        } catch {
            throw BatchError(.malformed, "not a protobuf Batch message: \(error)")
        }
        return try decode(wire)
    }

    public static func decode(_ wire: WireBatch) throws(BatchError) -> DecodedBatch {
        guard formatVersions.contains(wire.formatVersion) else {
            throw BatchError(
                .unsupportedVersion,
                "format_version \(wire.formatVersion) is not one of \(formatVersions.lowerBound)-\(formatVersions.upperBound)")
        }
        guard isValidIdentifier(wire.siteID) else {
            throw BatchError(.invalidField, "site_id is not 1-64 characters of a-z, 0-9 and -")
        }
        guard isValidIdentifier(wire.agentID) else {
            throw BatchError(.invalidField, "agent_id is not 1-64 characters of a-z, 0-9 and -")
        }
        guard wire.sequence > 0 else { throw BatchError(.invalidField, "sequence is 0; sequences start at 1") }
        guard wire.sequence <= maximumSequence else {
            throw BatchError(.invalidField, "sequence \(wire.sequence) is above the largest allowed, 2^62")
        }
        guard wire.firstUnacknowledgedSequence <= wire.sequence else {
            throw BatchError(
                .invalidField,
                "first_unacknowledged_sequence \(wire.firstUnacknowledgedSequence) is above sequence \(wire.sequence)")
        }
        let header = BatchHeader(
            siteID: wire.siteID, agentID: wire.agentID, bootID: wire.bootID, sequence: wire.sequence,
            firstUnacknowledgedSequence: wire.firstUnacknowledgedSequence)
        do {
            return try decodeBody(inflated(wire))
        } catch {
            var failure = error
            failure.header = header
            throw failure
        }
    }

    /// A version 2 or 3 batch with its body inflated into fields 9-14; a version 1 batch as it is.
    private static func inflated(_ wire: WireBatch) throws(BatchError) -> WireBatch {
        let hasBodyFields = !wire.beacons.isEmpty || !wire.sightingBeacon.isEmpty || !wire.sightingTimeDeltaUs.isEmpty
            || !wire.sightingRssi.isEmpty || !wire.dataFrames.isEmpty || !wire.characteristicReads.isEmpty
        if wire.formatVersion == 3 {
            guard timeUnits.contains(wire.sightingTimeUnitUs) else {
                throw BatchError(
                    .invalidField,
                    "sighting_time_unit_us \(wire.sightingTimeUnitUs) is not between 1 and 1,000,000 in a version 3 batch")
            }
        } else if wire.sightingTimeUnitUs != 0 {
            throw BatchError(.invalidField, "sighting_time_unit_us is set in a version \(wire.formatVersion) batch")
        }
        guard wire.formatVersion >= 2 else {
            guard wire.deflatedBody.isEmpty else {
                throw BatchError(.invalidField, "deflated_body is set in a version 1 batch")
            }
            return wire
        }
        guard !hasBodyFields else {
            throw BatchError(
                .invalidField, "fields 9-14 are set in a version \(wire.formatVersion) batch, whose body is in deflated_body")
        }
        guard !wire.deflatedBody.isEmpty else {
            throw BatchError(.invalidField, "deflated_body is empty in a version \(wire.formatVersion) batch")
        }
        let bodyBytes: [UInt8]
        do {
            bodyBytes = try Deflate.inflate(Array(wire.deflatedBody), limit: maximumBytes)
        } catch {
            throw BatchError(error.code == .tooLarge ? .tooLarge : .malformed, "deflated_body: \(error)")
        }
        let body: WireBatch
        do {
            body = try WireBatch(serializedBytes: bodyBytes)
        } catch {
            throw BatchError(.malformed, "deflated_body does not inflate to a protobuf Batch body: \(error)")
        }
        guard body.formatVersion == 0, body.siteID.isEmpty, body.agentID.isEmpty, body.bootID == 0, body.sequence == 0,
            body.firstUnacknowledgedSequence == 0, body.agentClockUs == 0, body.baseTimeUs == 0, body.deflatedBody.isEmpty,
            body.sightingTimeUnitUs == 0
        else {
            throw BatchError(.invalidField, "deflated_body holds header fields (1-8, 16) or another deflated_body")
        }
        var whole = wire
        whole.deflatedBody = Data()
        whole.beacons = body.beacons
        whole.sightingBeacon = body.sightingBeacon
        whole.sightingTimeDeltaUs = body.sightingTimeDeltaUs
        whole.sightingRssi = body.sightingRssi
        whole.dataFrames = body.dataFrames
        whole.characteristicReads = body.characteristicReads
        return whole
    }

    /// Everything after the header.
    private static func decodeBody(_ wire: WireBatch) throws(BatchError) -> DecodedBatch {
        guard isValidTime(wire.agentClockUs) else {
            throw BatchError(.invalidField, "agent_clock_us \(wire.agentClockUs) is not between 1970 and 2200")
        }
        guard isValidTime(wire.baseTimeUs) else {
            throw BatchError(.invalidField, "base_time_us \(wire.baseTimeUs) is not between 1970 and 2200")
        }
        let count = wire.sightingBeacon.count
        guard count <= maximumSightings else {
            throw BatchError(.tooLarge, "batch holds \(count) sightings, the limit is \(maximumSightings)")
        }
        guard wire.dataFrames.count <= maximumDataFrames else {
            throw BatchError(.tooLarge, "batch holds \(wire.dataFrames.count) data frames, the limit is \(maximumDataFrames)")
        }
        guard wire.characteristicReads.count <= maximumCharacteristicReads else {
            throw BatchError(
                .tooLarge,
                "batch holds \(wire.characteristicReads.count) characteristic reads, the limit is \(maximumCharacteristicReads)")
        }
        guard wire.beacons.count <= maximumSightings + maximumCharacteristicReads else {
            throw BatchError(.tooLarge, "batch names \(wire.beacons.count) beacons, more than its sightings and reads can use")
        }
        guard wire.sightingTimeDeltaUs.count == count, wire.sightingRssi.count == count else {
            throw BatchError(
                .inconsistentColumns,
                "sighting columns differ in length: beacon \(count), time \(wire.sightingTimeDeltaUs.count), "
                    + "rssi \(wire.sightingRssi.count)")
        }
        var beacons: [BeaconKey] = []
        beacons.reserveCapacity(wire.beacons.count)
        for (index, beacon) in wire.beacons.enumerated() {
            let beaconID: String
            var identity: BeaconIdentity?
            if !beacon.identity.isEmpty {
                guard let binary = BeaconIdentity(binary: Array(beacon.identity)) else {
                    throw BatchError(.invalidField, "beacons[\(index)].identity is no binary beacon id of a known kind and size")
                }
                identity = binary
                beaconID = binary.description
            } else {
                guard !beacon.beaconID.isEmpty, beacon.beaconID.utf8.count <= 256 else {
                    throw BatchError(.invalidField, "beacons[\(index)].beacon_id is empty or longer than 256 bytes")
                }
                beaconID = beacon.beaconID
                // Typed here once when it is an identity in canonical text (an agent that sent text ids).
                identity = BeaconIdentity(beaconID)
            }
            guard beacon.address >> 48 == 0 else {
                throw BatchError(.invalidField, "beacons[\(index)].address is wider than 48 bits")
            }
            var address = beacon.address
            var addressAsBefore = false
            if beacon.addressAsBefore {
                guard wire.formatVersion >= 3, address == 0 else {
                    throw BatchError(
                        .invalidField, "beacons[\(index)].address_as_before is set in a version \(wire.formatVersion) batch or beside an address")
                }
                // A device's id is its address; other identities' addresses come from the agent's earlier batches.
                if let device = identity?.deviceAddress {
                    address = device
                } else {
                    addressAsBefore = true
                }
            }
            var power: Int8?
            if beacon.hasPowerAt1MDbm {
                guard let value = Int8(exactly: beacon.powerAt1MDbm) else {
                    throw BatchError(.invalidField, "beacons[\(index)].power_at_1m_dbm \(beacon.powerAt1MDbm) is out of range")
                }
                power = value
            }
            var event: UInt16?
            if beacon.hasAdvertisingEvent {
                guard beacon.advertisingEvent <= AdvertisingReport.advertisingEventBits else {
                    throw BatchError(
                        .invalidField,
                        "beacons[\(index)].advertising_event \(beacon.advertisingEvent) sets bits above the five event-type bits")
                }
                event = UInt16(beacon.advertisingEvent)
            }
            beacons.append(
                BeaconKey(
                    beaconID: beaconID, identity: identity, address: address, addressIsRandom: beacon.addressIsRandom,
                    powerAt1mDbm: power, advertisingEvent: event, addressAsBefore: addressAsBefore))
        }
        var sightings: [Sighting] = []
        sightings.reserveCapacity(count)
        var time = wire.baseTimeUs
        var span: UInt64 = 0
        let unit = UInt64(wire.formatVersion == 3 ? wire.sightingTimeUnitUs : 1)
        for index in 0..<count {
            let beaconIndex = Int(wire.sightingBeacon[index])
            guard beaconIndex < beacons.count else {
                throw BatchError(
                    .inconsistentColumns, "sighting \(index) names beacon \(beaconIndex) of \(beacons.count)")
            }
            // At most a day each (then the product cannot overflow), and a day in all.
            let (delta, deltaOverflow) = wire.sightingTimeDeltaUs[index].multipliedReportingOverflow(by: unit)
            span = span &+ delta
            guard !deltaOverflow, delta <= maximumSpanMicros, span <= maximumSpanMicros else {
                throw BatchError(.invalidField, "sighting \(index) time runs more than a day past base_time_us")
            }
            let (next, overflow) = time.addingReportingOverflow(Int64(delta))
            guard !overflow else { throw BatchError(.invalidField, "sighting \(index) time overflows") }
            time = next
            let biased = wire.sightingRssi[index]
            guard biased <= 255, let rssi = Int8(exactly: Int32(biased) - rssiBias), rssiRange.contains(rssi) else {
                throw BatchError(
                    .invalidField, "sighting \(index) rssi \(Int64(biased) - Int64(rssiBias)) dBm is outside -127 to +20 (sent as RSSI + 128)")
            }
            sightings.append(Sighting(timeMicros: time, beacon: beacons[beaconIndex], rssi: rssi))
        }
        for (index, frame) in wire.dataFrames.enumerated() {
            let sighting = Int(frame.sighting)
            guard sighting < count else {
                throw BatchError(.inconsistentColumns, "data_frames[\(index)] names sighting \(sighting) of \(count)")
            }
            switch frame.content {
            case .eddystone(let data)?: sightings[sighting].frames.append(.eddystone(FrameBytes(data)))
            case .serviceData(let service)?:
                guard let uuid = UInt16(exactly: service.uuid16) else {
                    throw BatchError(.invalidField, "data_frames[\(index)] uuid16 \(service.uuid16) is not 16-bit")
                }
                sightings[sighting].frames.append(.serviceData(uuid16: uuid, FrameBytes(service.data)))
            case .manufacturerData(let manufacturer)?:
                guard let company = UInt16(exactly: manufacturer.companyID) else {
                    throw BatchError(
                        .invalidField, "data_frames[\(index)] company_id \(manufacturer.companyID) is not 16-bit")
                }
                sightings[sighting].frames.append(.manufacturerData(companyID: company, FrameBytes(manufacturer.data)))
            case nil:
                throw BatchError(.invalidField, "data_frames[\(index)] has no content")
            }
        }
        var reads: [CharacteristicRead] = []
        for (index, read) in wire.characteristicReads.enumerated() {
            guard Int(read.beacon) < beacons.count, let uuid = UInt16(exactly: read.characteristicUuid16) else {
                throw BatchError(.inconsistentColumns, "characteristic_reads[\(index)] names no beacon or no 16-bit UUID")
            }
            guard isValidTime(read.timeUs) else {
                throw BatchError(.invalidField, "characteristic_reads[\(index)].time_us \(read.timeUs) is not between 1970 and 2200")
            }
            reads.append(
                CharacteristicRead(
                    beacon: beacons[Int(read.beacon)], timeMicros: read.timeUs, characteristic: uuid,
                    value: Array(read.value)))
        }
        return DecodedBatch(
            siteID: wire.siteID, agentID: wire.agentID, bootID: wire.bootID, sequence: wire.sequence,
            firstUnacknowledgedSequence: wire.firstUnacknowledgedSequence, agentClockMicros: wire.agentClockUs,
            sightings: sightings, characteristicReads: reads, beaconEntries: beacons.count)
    }
}
