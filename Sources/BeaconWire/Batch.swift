import Deflate
import Foundation
import SwiftProtobuf

/// The wire batch (proto/beaconflow/v1/batch.proto).
public typealias WireBatch = Beaconflow_V1_Batch

/// The beacon a sighting belongs to, as the agent knows it: one entry of a batch's beacon dictionary.
public struct BeaconKey: Hashable, Sendable {
    /// The beacon-id contract's identity as text, or `eid:<hex>` for an EID the agent could not resolve.
    public var beaconID: String
    /// The same, typed, when the id is one of the contract's forms (nil: another scheme, sent as text).
    public var identity: BeaconIdentity?
    /// The device address, big-endian in the low 48 bits; 0 when pseudonymised.
    public var address: UInt64
    public var addressIsRandom: Bool
    /// Calibrated power at 1 m, in dBm, when the beacon's frames carry one.
    public var powerAt1mDbm: Int8?
    /// How the advertisement was sent (`AdvertisingReport.advertisingEvent`); nil when not reported.
    public var advertisingEvent: UInt16?
    /// Read from a batch that left the address out as known from the agent's earlier batches (`address` is 0 until
    /// a reader that knows it fills it in: `AgentAddresses` in the ingest).
    public var addressAsBefore: Bool

    /// `identity`: nil parses `beaconID`.
    public init(
        beaconID: String, identity: BeaconIdentity? = nil, address: UInt64, addressIsRandom: Bool, powerAt1mDbm: Int8? = nil,
        advertisingEvent: UInt16? = nil, addressAsBefore: Bool = false
    ) {
        self.beaconID = beaconID
        self.identity = identity ?? BeaconIdentity(beaconID)
        self.address = address
        self.addressIsRandom = addressIsRandom
        self.powerAt1mDbm = powerAt1mDbm
        self.advertisingEvent = advertisingEvent
        self.addressAsBefore = addressAsBefore
    }

    // `identity` is `beaconID` typed: equality and hashing need only the text.
    public static func == (left: BeaconKey, right: BeaconKey) -> Bool {
        left.beaconID == right.beaconID && left.address == right.address && left.addressIsRandom == right.addressIsRandom
            && left.powerAt1mDbm == right.powerAt1mDbm && left.advertisingEvent == right.advertisingEvent
            && left.addressAsBefore == right.addressAsBefore
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(beaconID)
        hasher.combine(address)
        hasher.combine(addressIsRandom)
        hasher.combine(powerAt1mDbm)
        hasher.combine(advertisingEvent)
        hasher.combine(addressAsBefore)
    }
}

/// A frame whose content matters beyond identity (TLM, URL, sensor data), as the bytes that were sent.
public enum DataFrameContent: Hashable, Sendable {
    /// Service data after the 0xFEAA UUID.
    case eddystone(FrameBytes)
    case serviceData(uuid16: UInt16, FrameBytes)
    case manufacturerData(companyID: UInt16, FrameBytes)

    /// Service data as a data frame: Eddystone's (0xFEAA) is an Eddystone frame.
    static func serviceData(_ uuid: UInt16, _ bytes: FrameBytes) -> DataFrameContent {
        uuid == Eddystone.serviceUUID ? .eddystone(bytes) : .serviceData(uuid16: uuid, bytes)
    }

    /// Which stream of frames this is for its beacon: a TLM never replaces a URL.
    var stream: UInt32 {
        switch self {
        case .eddystone(let bytes): 0x1_0000 | UInt32(bytes.first ?? 0)
        case .serviceData(let uuid, _): 0x2_0000 | UInt32(uuid)
        case .manufacturerData(let company, _): 0x3_0000 | UInt32(company)
        }
    }
}

/// One advertisement heard.
public struct Sighting: Hashable, Sendable {
    /// Capture time, Unix microseconds.
    public var timeMicros: Int64
    public var beacon: BeaconKey
    public var rssi: Int8
    /// The advertisement's data frames, in the order they appeared (one advert may carry several: a thermometer's
    /// temperature and battery service data).
    public var frames: DataFrames

    public init(timeMicros: Int64, beacon: BeaconKey, rssi: Int8, data: DataFrameContent? = nil) {
        self.init(timeMicros: timeMicros, beacon: beacon, rssi: rssi, frames: data.map { [$0] } ?? [])
    }

    public init(timeMicros: Int64, beacon: BeaconKey, rssi: Int8, frames: DataFrames) {
        self.timeMicros = timeMicros
        self.beacon = beacon
        self.rssi = rssi
        self.frames = frames
    }

    /// Whether it carries an Eddystone URL, TLM or eTLM frame: data that names no beacon and belongs to the UID or
    /// EID beacon sending from the same address.
    public var carriesEddystoneData: Bool { frames.contains { if case .eddystone = $0 { true } else { false } } }

    /// The first data frame; setting it replaces them all.
    public var data: DataFrameContent? {
        get { frames.first }
        set { frames = newValue.map { [$0] } ?? [] }
    }
}

/// Collects sightings into batches: a pure state machine, driven by the caller's monotonic clock.
///
/// A batch is due when it holds `maximumSightings` or when its first sighting was added `maximumAgeNanoseconds`
/// ago. Data frames whose content equals what this builder last emitted for the same beacon and stream are left
/// out (the sighting stays), unless `dataRefreshMicroseconds` of capture time have passed since, so that a newly
/// started ingest learns every beacon's URL and sensor values within that interval. In version 3 a beacon's device
/// address is left out while it is known from this builder's earlier batches (`Configuration.omitsKnownAddresses`).
public struct BatchBuilder: Sendable {
    public struct Configuration: Sendable {
        public var maximumSightings = 1000
        public var maximumAgeNanoseconds: UInt64 = 1_000_000_000
        public var dataRefreshMicroseconds: Int64 = 60_000_000
        /// The wire format the sealed batches declare (`BatchReader.formatVersions`); `wireBytes()` follows it.
        public var formatVersion = BatchReader.formatVersion
        /// In version 3, the unit of the sightings' time deltas, µs (`BatchReader.timeUnits`): each sighting's time
        /// is rounded to the nearest multiple of it in Unix time. Earlier versions carry microseconds.
        public var timeUnitMicros: UInt32 = 1000
        /// In version 3, leave out a beacon's address when it is known (`Beacon.address_as_before`): a `mac:` id's
        /// address is the id, and another identity's is what this builder sent for it within the last
        /// `BatchReader.addressAsBeforeMicros`, while no other address was heard for it over twice that.
        public var omitsKnownAddresses = true

        public init() {}

        /// The time a sighting captured at `micros` (Unix µs) carries in a batch of this configuration: the same
        /// whatever batch it lands in.
        public func sentTime(_ micros: Int64) -> Int64 {
            let unit = sentUnitMicros
            guard unit > 1 else { return micros }
            let shifted = micros + unit / 2
            return (shifted >= 0 ? shifted / unit : (shifted - unit + 1) / unit) * unit
        }

        /// The unit the sealed batches' time deltas are in: `timeUnitMicros` within `BatchReader.timeUnits` in
        /// version 3, a microsecond before.
        var sentUnitMicros: Int64 {
            formatVersion >= 3 ? Int64(min(max(timeUnitMicros, BatchReader.timeUnits.lowerBound), BatchReader.timeUnits.upperBound)) : 1
        }
    }

    private struct DataKey: Hashable {
        var beaconID: String
        var stream: UInt32
    }

    public let siteID: String
    public let agentID: String
    public let bootID: UInt64
    public var configuration: Configuration

    private var sightings: [Sighting] = []
    private var reads: [CharacteristicRead] = []
    private var openedAtNanoseconds: UInt64?
    private var earliest: Int64 = 0
    private var latest: Int64 = 0
    private var lastEmitted: [DataKey: (content: DataFrameContent, timeMicros: Int64)] = [:]
    /// The addresses sent in earlier batches, for those that may be left out.
    private var addresses = SentAddresses()

    public init(siteID: String, agentID: String, bootID: UInt64, configuration: Configuration = Configuration()) {
        self.siteID = siteID
        self.agentID = agentID
        self.bootID = bootID
        self.configuration = configuration
        sightings.reserveCapacity(configuration.maximumSightings)
    }

    /// Sightings in the open batch.
    public var count: Int { sightings.count }
    /// Nothing waits to be sealed.
    public var isEmpty: Bool { sightings.isEmpty && reads.isEmpty }

    /// Adds a GATT read; it goes out with the next batch.
    public mutating func add(_ read: CharacteristicRead, nowNanoseconds: UInt64) {
        if isEmpty { openedAtNanoseconds = nowNanoseconds }
        reads.append(read)
    }

    /// Whether `sighting` can join the open batch: a batch spans at most `BatchReader.maximumSpanMicros` of
    /// capture time, less a time unit for the rounding (a clock jump, or a capture with a gap of days, starts a new
    /// batch).
    public func fits(_ sighting: Sighting) -> Bool {
        guard !sightings.isEmpty else { return true }
        let low = min(earliest, sighting.timeMicros)
        let high = max(latest, sighting.timeMicros)
        let (span, overflow) = high.subtractingReportingOverflow(low)
        return !overflow && UInt64(span) <= BatchReader.maximumSpanMicros - UInt64(configuration.sentUnitMicros)
    }

    /// Adds a sighting; returns true when the batch is now full and should be sealed. Seal first when
    /// `fits(sighting)` is false.
    public mutating func add(_ sighting: Sighting, nowNanoseconds: UInt64) -> Bool {
        var sighting = sighting
        if !sighting.frames.isEmpty {
            sighting.frames = sighting.frames.filter { content in
                let key = DataKey(beaconID: sighting.beacon.beaconID, stream: content.stream)
                if let last = lastEmitted[key], last.content == content, sighting.timeMicros >= last.timeMicros,
                    sighting.timeMicros.subtractingReportingOverflow(last.timeMicros).partialValue
                        < configuration.dataRefreshMicroseconds,
                    !sighting.timeMicros.subtractingReportingOverflow(last.timeMicros).overflow
                {
                    return false
                }
                lastEmitted[key] = (content, sighting.timeMicros)
                return true
            }
        }
        if sightings.isEmpty {
            if reads.isEmpty { openedAtNanoseconds = nowNanoseconds }
            earliest = sighting.timeMicros
            latest = sighting.timeMicros
        }
        earliest = min(earliest, sighting.timeMicros)
        latest = max(latest, sighting.timeMicros)
        sightings.append(sighting)
        return sightings.count >= configuration.maximumSightings
    }

    /// Whether the open batch has waited long enough to be sealed.
    public func isDue(nowNanoseconds: UInt64) -> Bool {
        guard let opened = openedAtNanoseconds, !isEmpty else { return false }
        return sightings.count >= configuration.maximumSightings
            || nowNanoseconds &- opened >= configuration.maximumAgeNanoseconds
    }

    /// When the open batch becomes due by age, on the caller's monotonic clock; nil when it is empty.
    public var deadlineNanoseconds: UInt64? {
        openedAtNanoseconds.map { $0 &+ configuration.maximumAgeNanoseconds }
    }

    /// Closes the open batch and returns it, nil when it holds no sighting.
    public mutating func seal(
        sequence: UInt64, firstUnacknowledgedSequence: UInt64, agentClockMicros: Int64
    ) -> WireBatch? {
        guard !isEmpty else { return nil }
        defer {
            sightings.removeAll(keepingCapacity: true)
            reads.removeAll()
            openedAtNanoseconds = nil
            forgetOldDataFrames()
        }
        // Capture order; equal times keep their arrival order.
        let order = sightings.indices.sorted { (sightings[$0].timeMicros, $0) < (sightings[$1].timeMicros, $1) }
        var batch = WireBatch()
        batch.formatVersion = configuration.formatVersion
        batch.siteID = siteID
        batch.agentID = agentID
        batch.bootID = bootID
        batch.sequence = sequence
        batch.firstUnacknowledgedSequence = firstUnacknowledgedSequence
        batch.agentClockUs = agentClockMicros
        batch.baseTimeUs = order.first.map { configuration.sentTime(sightings[$0].timeMicros) } ?? reads[0].timeMicros
        batch.sightingBeacon.reserveCapacity(order.count)
        batch.sightingTimeDeltaUs.reserveCapacity(order.count)
        batch.sightingRssi.reserveCapacity(order.count)

        var dictionary: [BeaconKey: UInt32] = [:]
        var keys: [BeaconKey] = []
        func dictionaryIndex(of key: BeaconKey) -> UInt32 {
            if let known = dictionary[key] { return known }
            let index = UInt32(keys.count)
            dictionary[key] = index
            keys.append(key)
            return index
        }
        let unit = configuration.sentUnitMicros
        if configuration.formatVersion >= 3 { batch.sightingTimeUnitUs = UInt32(unit) }
        var previousTime = batch.baseTimeUs
        for (position, index) in order.enumerated() {
            let sighting = sightings[index]
            let beaconIndex = dictionaryIndex(of: sighting.beacon)
            batch.sightingBeacon.append(beaconIndex)
            // Sorted, and rounding keeps the order, so the difference is not negative (and `fits` kept it within a
            // day); both times are multiples of the unit.
            let time = configuration.sentTime(sighting.timeMicros)
            batch.sightingTimeDeltaUs.append(UInt64(bitPattern: (time &- previousTime) / unit))
            batch.sightingRssi.append(UInt32(Int32(sighting.rssi) + BatchReader.rssiBias))
            previousTime = time
            for content in sighting.frames {
                var frame = Beaconflow_V1_DataFrame()
                frame.sighting = UInt32(position)
                switch content {
                case .eddystone(let bytes): frame.eddystone = Data(bytes)
                case .serviceData(let uuid, let bytes):
                    var data = Beaconflow_V1_ServiceData()
                    data.uuid16 = UInt32(uuid)
                    data.data = Data(bytes)
                    frame.serviceData = data
                case .manufacturerData(let company, let bytes):
                    var data = Beaconflow_V1_ManufacturerData()
                    data.companyID = UInt32(company)
                    data.data = Data(bytes)
                    frame.manufacturerData = data
                }
                batch.dataFrames.append(frame)
            }
        }
        for read in reads {
            var wire = Beaconflow_V1_CharacteristicRead()
            wire.beacon = dictionaryIndex(of: read.beacon)
            wire.timeUs = read.timeMicros
            wire.characteristicUuid16 = UInt32(read.characteristic)
            wire.value = Data(read.value)
            batch.characteristicReads.append(wire)
        }
        let known: Set<String> = configuration.omitsKnownAddresses && configuration.formatVersion >= 3
            ? addresses.known(keys, batchMicros: batch.baseTimeUs) : []
        batch.beacons.reserveCapacity(keys.count)
        for key in keys {
            var beacon = Beaconflow_V1_Beacon()
            if let identity = key.identity {
                beacon.identity = Data(identity.binary)
            } else {
                beacon.beaconID = key.beaconID
            }
            if key.addressAsBefore || known.contains(key.beaconID) {
                beacon.addressAsBefore = true
            } else {
                beacon.address = key.address
            }
            beacon.addressIsRandom = key.addressIsRandom
            if let power = key.powerAt1mDbm { beacon.powerAt1MDbm = Int32(power) }
            if let event = key.advertisingEvent { beacon.advertisingEvent = UInt32(event) }
            batch.beacons.append(beacon)
        }
        return batch
    }

    /// Keeps the change-detection memory bounded: beacons gone for two refresh intervals are forgotten.
    private mutating func forgetOldDataFrames() {
        guard let newest = lastEmitted.values.map(\.timeMicros).max() else { return }
        let horizon = newest - 2 * configuration.dataRefreshMicroseconds
        if lastEmitted.values.contains(where: { $0.timeMicros < horizon }) {
            lastEmitted = lastEmitted.filter { $0.value.timeMicros >= horizon }
        }
    }
}

extension WireBatch {
    /// The batch as published: serialized as it is in version 1; in versions 2 and 3 with its body (fields 9-14)
    /// serialized on its own and compressed into `deflated_body` (unless it is there already).
    public func wireBytes() throws -> [UInt8] {
        guard formatVersion >= 2, deflatedBody.isEmpty else { return try serializedBytes() }
        var body = WireBatch()
        body.beacons = beacons
        body.sightingBeacon = sightingBeacon
        body.sightingTimeDeltaUs = sightingTimeDeltaUs
        body.sightingRssi = sightingRssi
        body.dataFrames = dataFrames
        body.characteristicReads = characteristicReads
        var header = self
        header.beacons = []
        header.sightingBeacon = []
        header.sightingTimeDeltaUs = []
        header.sightingRssi = []
        header.dataFrames = []
        header.characteristicReads = []
        // Level 9: on batches of a few kB it costs no more time than the default level and saves a little.
        header.deflatedBody = Data(try Deflate.compress(body.serializedBytes(), level: 9))
        return try header.serializedBytes()
    }
}
