/// The ATT conversation of a GATT poll (Core Specification Vol 3, Part F and G): discover the primary services,
/// discover the characteristics of Battery (0x180F) and Device Information (0x180A), and read Battery Level
/// (0x2A19), System ID (0x2A23) and the Device Information strings (0x2A24–0x2A29); with `extraCharacteristics`,
/// the characteristics of every service with a 16-bit UUID are discovered and those listed read too. A pure state
/// machine: it says which request PDU to send and takes each response PDU. ATT allows one outstanding request at a
/// time.
public struct ATTClient: Sendable {
    /// A characteristic value read from the device.
    public struct Reading: Sendable, Hashable {
        public var characteristic: UInt16
        public var value: [UInt8]
    }

    public enum Step: Sendable, Equatable {
        /// Send this request PDU and feed the response to `receive`.
        case send([UInt8])
        /// The poll is over: what was read, and the characteristics the device refused (with the ATT error code).
        case finished(readings: [Reading], refused: [UInt16: UInt8])
        /// The device answered something that is not ATT (or not an answer to the request).
        case failed(String)
    }

    public static let wantedServices: Set<UInt16> = [0x180F, 0x180A]
    public static let wantedCharacteristics: Set<UInt16> = [0x2A19, 0x2A23, 0x2A24, 0x2A25, 0x2A26, 0x2A27, 0x2A28, 0x2A29]

    static let errorResponse: UInt8 = 0x01
    static let readByTypeRequest: UInt8 = 0x08
    static let readByTypeResponse: UInt8 = 0x09
    static let readRequest: UInt8 = 0x0A
    static let readResponse: UInt8 = 0x0B
    static let readByGroupTypeRequest: UInt8 = 0x10
    static let readByGroupTypeResponse: UInt8 = 0x11
    static let attributeNotFound: UInt8 = 0x0A

    private enum Phase: Equatable {
        case services(from: UInt16)
        case characteristics(service: Int, from: UInt16)
        case reading(index: Int)
        case done
    }

    private var phase: Phase = .services(from: 1)
    private var services: [(uuid: UInt16, start: UInt16, end: UInt16)] = []
    private var characteristics: [(uuid: UInt16, valueHandle: UInt16)] = []
    private var readings: [Reading] = []
    private var refused: [UInt16: UInt8] = [:]

    /// Characteristics (16-bit UUIDs) a site lists beyond Battery Level and Device Information.
    public let extraCharacteristics: Set<UInt16>

    public init(extraCharacteristics: Set<UInt16> = []) {
        self.extraCharacteristics = extraCharacteristics
    }

    /// The first request.
    public mutating func start() -> Step {
        phase = .services(from: 1)
        return request()
    }

    public mutating func receive(_ pdu: [UInt8]) -> Step {
        guard let opcode = pdu.first else { return .failed("an empty ATT PDU") }
        let error: UInt8? = opcode == Self.errorResponse && pdu.count >= 5 ? pdu[4] : nil
        switch phase {
        case .services(let from):
            if error == Self.attributeNotFound { return nextAfterServices() }
            guard opcode == Self.readByGroupTypeResponse, pdu.count >= 2, pdu[1] >= 6 else {
                return unexpected(pdu, "Read By Group Type")
            }
            let length = Int(pdu[1])
            var last = from
            for entry in stride(from: 2, to: pdu.count - length + 1, by: length) {
                let start = le16(pdu, entry)
                let end = le16(pdu, entry + 2)
                // 16-bit UUIDs come as themselves; 128-bit ones are never Battery or Device Information.
                if length == 6 { services.append((le16(pdu, entry + 4), start, end)) }
                last = max(last, end)
            }
            guard last < 0xFFFF, last >= from else { return nextAfterServices() }
            phase = .services(from: last + 1)
            return request()
        case .characteristics(let service, let from):
            if error == Self.attributeNotFound { return nextService(after: service) }
            guard opcode == Self.readByTypeResponse, pdu.count >= 2, pdu[1] >= 7 else {
                return unexpected(pdu, "Read By Type")
            }
            let length = Int(pdu[1])
            var last = from
            for entry in stride(from: 2, to: pdu.count - length + 1, by: length) {
                let declaration = le16(pdu, entry)
                // Handle, then the declaration value: properties, value handle, UUID.
                if length == 7 { characteristics.append((le16(pdu, entry + 5), le16(pdu, entry + 3))) }
                last = max(last, declaration)
            }
            let end = wanted[service].end
            guard last < end, last >= from else { return nextService(after: service) }
            phase = .characteristics(service: service, from: last + 1)
            return request()
        case .reading(let index):
            let characteristic = characteristics[index].uuid
            if let error {
                refused[characteristic] = error
            } else if opcode == Self.readResponse {
                readings.append(Reading(characteristic: characteristic, value: Array(pdu.dropFirst())))
            } else {
                return unexpected(pdu, "Read")
            }
            return nextRead(after: index)
        case .done:
            return .failed("an ATT PDU after the poll ended")
        }
    }

    private var wanted: [(uuid: UInt16, start: UInt16, end: UInt16)] {
        extraCharacteristics.isEmpty ? services.filter { Self.wantedServices.contains($0.uuid) } : services
    }

    private mutating func nextAfterServices() -> Step {
        nextService(after: -1)
    }

    private mutating func nextService(after index: Int) -> Step {
        let next = index + 1
        guard next < wanted.count else {
            characteristics = characteristics.filter {
                Self.wantedCharacteristics.contains($0.uuid) || extraCharacteristics.contains($0.uuid)
            }
            return nextRead(after: -1)
        }
        phase = .characteristics(service: next, from: wanted[next].start)
        return request()
    }

    private mutating func nextRead(after index: Int) -> Step {
        let next = index + 1
        guard next < characteristics.count else {
            phase = .done
            return .finished(readings: readings, refused: refused)
        }
        phase = .reading(index: next)
        return request()
    }

    private func request() -> Step {
        switch phase {
        case .services(let from):
            return .send([Self.readByGroupTypeRequest] + le(from) + le(0xFFFF) + le(0x2800))
        case .characteristics(let service, let from):
            return .send([Self.readByTypeRequest] + le(from) + le(wanted[service].end) + le(0x2803))
        case .reading(let index):
            return .send([Self.readRequest] + le(characteristics[index].valueHandle))
        case .done:
            return .finished(readings: readings, refused: refused)
        }
    }

    private func unexpected(_ pdu: [UInt8], _ request: String) -> Step {
        let opcode = pdu.first.map { "0x" + String($0, radix: 16) } ?? "nothing"
        let code = pdu.first == Self.errorResponse && pdu.count >= 5 ? ", ATT error 0x\(String(pdu[4], radix: 16))" : ""
        return .failed("the device answered \(request) with opcode \(opcode)\(code)")
    }
}

extension ATTClient {
    /// The agent's MTU: ATT's default on LE, all a poll of short values needs.
    static let mtu: UInt16 = 23
    static let exchangeMTURequest: UInt8 = 0x02
    static let exchangeMTUResponse: UInt8 = 0x03
    static let requestNotSupported: UInt8 = 0x06
    /// Requests that look for attributes: the agent has none to find.
    static let discoveryRequests: Set<UInt8> = [0x04, 0x06, 0x08, 0x10]

    /// The agent's answer to a request the peer sends on the same ATT bearer (a BlueZ peripheral's daemon
    /// discovers its centrals' services as soon as they connect): its MTU to Exchange MTU, Attribute Not Found to
    /// discovery, Request Not Supported to anything else; nil for a PDU that is not a request to the agent (its
    /// responses, notifications, indications and commands).
    public static func answer(toPeerRequest pdu: [UInt8]) -> [UInt8]? {
        guard let opcode = pdu.first, opcode & 0x01 == 0, opcode & 0x40 == 0, opcode != 0x1E else { return nil }
        if opcode == exchangeMTURequest { return [exchangeMTUResponse] + le(mtu) }
        let handle = discoveryRequests.contains(opcode) && pdu.count >= 3 ? [pdu[1], pdu[2]] : [0, 0]
        return [errorResponse, opcode] + handle + [discoveryRequests.contains(opcode) ? attributeNotFound : requestNotSupported]
    }
}

private func le16(_ bytes: [UInt8], _ offset: Int) -> UInt16 {
    UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
}

private func le(_ value: UInt16) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8)] }
