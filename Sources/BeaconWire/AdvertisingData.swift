/// AD type codes from the Bluetooth Assigned Numbers, section 2.3 (Common Data Types).
public enum ADType {
    public static let flags: UInt8 = 0x01
    public static let incompleteUUID16: UInt8 = 0x02
    public static let completeUUID16: UInt8 = 0x03
    public static let incompleteUUID32: UInt8 = 0x04
    public static let completeUUID32: UInt8 = 0x05
    public static let incompleteUUID128: UInt8 = 0x06
    public static let completeUUID128: UInt8 = 0x07
    public static let shortenedLocalName: UInt8 = 0x08
    public static let completeLocalName: UInt8 = 0x09
    public static let txPowerLevel: UInt8 = 0x0A
    public static let serviceData16: UInt8 = 0x16
    public static let appearance: UInt8 = 0x19
    public static let serviceData32: UInt8 = 0x20
    public static let serviceData128: UInt8 = 0x21
    public static let manufacturerData: UInt8 = 0xFF
}

/// One AD structure: its type and its data (the bytes after the type byte).
public struct ADStructure: Sendable {
    public var type: UInt8
    public var data: ArraySlice<UInt8>
    /// Offset of the structure's length byte in the payload.
    public var offset: Int
    /// Offset of `data`'s first byte in the payload.
    public var dataOffset: Int { offset + 2 }
}

/// Walks the AD structures of an advertising or scan-response payload without allocating.
///
/// A zero length byte ends the payload (controllers pad legacy PDUs with zeros); a length that runs past the end
/// is an error at the offset of that length byte (Core Specification Vol 3, Part C, §11).
public struct ADIterator {
    private var reader: ByteReader

    public init(_ payload: ArraySlice<UInt8>, base: Int = 0) {
        reader = ByteReader(payload, base: base)
    }

    public mutating func next() throws(DecodeError) -> ADStructure? {
        guard !reader.isAtEnd else { return nil }
        let offset = reader.offset
        let length = Int(try reader.u8("AD length"))
        if length == 0 {
            _ = reader.rest()
            return nil
        }
        guard length <= reader.remaining else {
            throw DecodeError(
                .lengthOverrun, at: offset,
                "AD structure length \(length) runs past the end of the payload (\(reader.remaining) bytes left)")
        }
        let type = try reader.u8("AD type")
        let data = try reader.slice(length - 1, "AD data")
        return ADStructure(type: type, data: data, offset: offset)
    }
}

public struct ServiceData: Hashable, Sendable {
    public var uuid: BluetoothUUID
    public var data: [UInt8]
    /// Offset of `data` in the advertising payload.
    public var offset: Int

    public init(uuid: BluetoothUUID, data: [UInt8], offset: Int = 0) {
        self.uuid = uuid
        self.data = data
        self.offset = offset
    }
}

public struct ManufacturerData: Hashable, Sendable {
    public var companyID: UInt16
    /// The bytes after the company identifier.
    public var data: [UInt8]
    /// Offset of `data` in the advertising payload.
    public var offset: Int

    public init(companyID: UInt16, data: [UInt8], offset: Int = 0) {
        self.companyID = companyID
        self.data = data
        self.offset = offset
    }
}

/// The generic content of an advertising payload (every AD type the product reads), before beacon decoding.
public struct AdvertisingData: Hashable, Sendable {
    public var flags: UInt8?
    public var localName: String?
    public var localNameIsComplete = false
    public var txPowerLevel: Int8?
    public var appearance: UInt16?
    public var serviceUUIDs: [BluetoothUUID] = []
    public var serviceData: [ServiceData] = []
    public var manufacturerData: [ManufacturerData] = []

    public init() {}

    /// Parses every AD structure of `payload`. Unknown AD types are skipped; known types with a size their
    /// definition does not allow are errors.
    public init(parsing payload: [UInt8]) throws(DecodeError) {
        try self.init(parsing: payload[...])
    }

    public init(parsing payload: ArraySlice<UInt8>, base: Int = 0) throws(DecodeError) {
        var iterator = ADIterator(payload, base: base)
        while let structure = try iterator.next() {
            try absorb(structure)
        }
    }

    private mutating func absorb(_ structure: ADStructure) throws(DecodeError) {
        let data = structure.data
        var reader = ByteReader(data, base: structure.dataOffset)
        func exact(_ count: Int, _ name: StaticString) throws(DecodeError) {
            if data.count != count {
                throw DecodeError(
                    .invalidLength, at: structure.offset,
                    "\(name) AD structure has \(data.count) data bytes, expected \(count)")
            }
        }
        func uuidList(width: Int, _ name: StaticString) throws(DecodeError) {
            if data.count % width != 0 {
                throw DecodeError(
                    .invalidLength, at: structure.offset,
                    "\(name) list of \(data.count) bytes is not a multiple of \(width)")
            }
            while !reader.isAtEnd {
                serviceUUIDs.append(try BluetoothUUID.readLittleEndian(&reader, width: width))
            }
        }
        func serviceData(width: Int) throws(DecodeError) {
            if data.count < width {
                throw DecodeError(
                    .invalidLength, at: structure.offset,
                    "service data AD structure has \(data.count) data bytes, too short for its \(width)-byte UUID")
            }
            let uuid = try BluetoothUUID.readLittleEndian(&reader, width: width)
            let dataOffset = reader.offset
            self.serviceData.append(ServiceData(uuid: uuid, data: Array(reader.rest()), offset: dataOffset))
        }

        switch structure.type {
        case ADType.flags:
            // Some stacks send a zero-padded flags field longer than one byte; the first byte is the flags.
            if data.isEmpty { try exact(1, "flags") }
            flags = data.first
        case ADType.incompleteUUID16, ADType.completeUUID16: try uuidList(width: 2, "16-bit service UUID")
        case ADType.incompleteUUID32, ADType.completeUUID32: try uuidList(width: 4, "32-bit service UUID")
        case ADType.incompleteUUID128, ADType.completeUUID128: try uuidList(width: 16, "128-bit service UUID")
        case ADType.shortenedLocalName where localNameIsComplete:
            break  // the complete name wins, wherever the shortened one comes
        case ADType.shortenedLocalName, ADType.completeLocalName:
            localName = String(decoding: data, as: UTF8.self)
            localNameIsComplete = structure.type == ADType.completeLocalName
        case ADType.txPowerLevel:
            try exact(1, "tx power level")
            txPowerLevel = Int8(bitPattern: data[data.startIndex])
        case ADType.appearance:
            try exact(2, "appearance")
            appearance = try reader.u16le("appearance")
        case ADType.serviceData16: try serviceData(width: 2)
        case ADType.serviceData32: try serviceData(width: 4)
        case ADType.serviceData128: try serviceData(width: 16)
        case ADType.manufacturerData:
            if data.count < 2 {
                throw DecodeError(
                    .invalidLength, at: structure.offset,
                    "manufacturer data AD structure has \(data.count) data bytes, too short for a company identifier")
            }
            let company = try reader.u16le("company identifier")
            let dataOffset = reader.offset
            manufacturerData.append(ManufacturerData(companyID: company, data: Array(reader.rest()), offset: dataOffset))
        default:
            break
        }
    }
}
