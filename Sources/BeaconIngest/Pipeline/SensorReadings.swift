import BeaconWire

/// One row of the `sensor_readings` view, with what identifies its transmission.
public struct SensorReadingRow: Sendable, Equatable {
    public var timeMicros: Int64
    public var siteID: String
    public var agentID: String
    public var beaconID: String
    public var reading: SensorReading
    /// The frame's `type` (`ruuvi`, `bthome`, `eddystone-tlm`, `gatt-read`, ...).
    public var frameType: String
    /// The frame's bytes, hashed: the same for every agent that heard the transmission.
    public var frameHash: Int64
    /// Receptions of the same bytes from the same beacon this close in event time are one transmission.
    public var toleranceMicros: Int64
}

/// The latest value of a Device Information string (or of a listed characteristic without a decoder, in hex) read
/// over GATT: a row of the `device_info` view.
public struct DeviceInfoRow: Sendable, Equatable {
    public var timeMicros: Int64
    public var siteID: String
    public var agentID: String
    public var beaconID: String
    public var name: String
    public var value: String
}

/// A data frame the ingest could not read: counted, and logged with its beacon.
public struct UndecodableFrame: Sendable, Equatable {
    public var beaconID: String
    /// A bounded label for metrics: the decode error's code, or `no_bindkey` for encrypted BTHome without a key.
    public var reason: String
    public var message: String
}

/// FNV-1a, 64 bits, over a frame's stream and bytes: a frame's identity in `sensor_readings_raw.frame_hash`.
enum FrameHash {
    static func of(_ content: DataFrameContent) -> Int64 {
        switch content {
        case .eddystone(let bytes): of(tag: 0x1_0000, bytes)
        case .serviceData(let uuid, let bytes): of(tag: 0x2_0000 | UInt32(uuid), bytes)
        case .manufacturerData(let company, let bytes): of(tag: 0x3_0000 | UInt32(company), bytes)
        }
    }

    static func of(tag: UInt32, _ bytes: some Sequence<UInt8>, time: Int64 = 0) -> Int64 {
        var hash = FNV1a()
        hash.add(littleEndian: UInt64(tag), byteCount: 4)
        hash.add(littleEndian: UInt64(bitPattern: time))
        hash.add(bytes)
        return Int64(bitPattern: hash.value)
    }
}

/// Offers each transmission's readings once however many agents heard it: a fast path in memory in front of the
/// writer's look in the database (which makes it exact across restarts and instances).
///
/// A transmission is a beacon and the bytes of its frame. Frames with a counter differ from one transmission to
/// the next, so equal bytes within `counterWindowMicros` of event time are the same transmission (an agent lagging
/// more than that offers it again, and the database refuses it). Frames without one repeat their bytes while the
/// values stay, so equal bytes count as one transmission only within `repeatToleranceMicros` (receptions by
/// several agents, clock offsets): the same values heard again later are a new reading. A pure state machine.
public struct SensorDeduplicator: Sendable {
    public var counterWindowMicros: Int64 = 300_000_000
    public var repeatToleranceMicros: Int64 = 5_000_000
    /// At most this many frames per beacon (ten a second for the whole window).
    public var maximumRemembered = 3_000

    private struct Seen: Sendable {
        var hash: Int64
        var timeMicros: Int64
    }

    private struct Recent: Sendable {
        var frames: [Seen] = []
        var newestMicros: Int64
    }

    private var recent = JournaledDictionary<String, Recent>()

    public init() {}

    public func tolerance(carriesCounter: Bool) -> Int64 {
        carriesCounter ? counterWindowMicros : repeatToleranceMicros
    }

    /// Whether this frame of this beacon is a transmission not offered yet.
    public mutating func observe(beaconID: String, frameHash: Int64, timeMicros: Int64, toleranceMicros: Int64) -> Bool {
        var entry = recent[beaconID] ?? Recent(newestMicros: timeMicros)
        if entry.frames.contains(where: {
            $0.hash == frameHash && abs($0.timeMicros.subtractingReportingOverflow(timeMicros).partialValue) <= toleranceMicros
        }) {
            return false
        }
        entry.frames.append(Seen(hash: frameHash, timeMicros: timeMicros))
        entry.newestMicros = max(entry.newestMicros, timeMicros)
        let horizon = entry.newestMicros - counterWindowMicros
        entry.frames.removeAll { $0.timeMicros < horizon }
        if entry.frames.count > maximumRemembered { entry.frames.removeFirst(entry.frames.count - maximumRemembered) }
        recent[beaconID] = entry
        return true
    }

    public var trackedBeacons: Int { recent.count }

    mutating func evict(keeping maximum: Int) {
        recent.evictOldest(keeping: maximum) { $0.newestMicros }
    }

    mutating func beginTransaction() { recent.beginTransaction() }
    mutating func commitTransaction() { recent.commitTransaction() }
    mutating func rollbackTransaction() { recent.rollbackTransaction() }
}
