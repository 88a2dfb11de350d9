import BeaconWire
import Foundation

// Writes a btsnoop capture of a busy site for the agent load measurement (scripts/bench-agent):
//   ReplayLoad PATH [ADVERTS_PER_SECOND] [SECONDS]
// 200 beacons (100 Eddystone with a TLM every 10th frame and a URL every 20th, 100 iBeacon), each advertising
// at ADVERTS_PER_SECOND / 200 Hz, RSSI -95...-45 dBm.
let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: ReplayLoad PATH [ADVERTS_PER_SECOND] [SECONDS]\n".utf8))
    exit(64)
}
let rate = arguments.count > 2 ? Int(arguments[2]) ?? 1000 : 1000
let seconds = arguments.count > 3 ? Int(arguments[3]) ?? 60 : 60
let beacons = 200
let start: Int64 = 1_763_800_000_000_000
let flags: [UInt8] = [0x02, 0x01, 0x06]
let eddystoneList: [UInt8] = [0x03, 0x03, 0xAA, 0xFE]

func serviceData(_ frame: [UInt8]) -> [UInt8] { [UInt8(frame.count + 3), 0x16, 0xAA, 0xFE] + frame }

var out = Data(BtsnoopWriter.fileHeader)
var rssiState: UInt64 = 1
let total = rate * seconds
for index in 0..<total {
    let beacon = index % beacons
    let round = index / beacons
    let time = start + Int64(index) * 1_000_000 / Int64(rate)
    rssiState = rssiState &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
    let rssi = Int8(-95 + Int(rssiState >> 33) % 51)
    let address = DeviceAddress(value: 0xC000_0000_0000 | UInt64(beacon), kind: .random)
    var data: [UInt8]
    if beacon < 100 {
        if round % 10 == 9 {
            let tlm = EddystoneTLM(
                batteryMillivolts: 3000, temperatureRaw: 0x1680, advertisingCount: UInt32(round * 10),
                uptimeTenths: UInt32(round * 2))
            data = flags + eddystoneList + serviceData([0x20, 0x00] + tlm.fieldBytes)
        } else if round % 20 == 4 {
            data = flags + eddystoneList + serviceData([0x10, 0xEB] + EddystoneURL.encode("https://example.com/\(beacon)")!)
        } else {
            let instance = (0..<6).map { UInt8(truncatingIfNeeded: beacon >> (8 * (5 - $0))) }
            data = flags + eddystoneList + serviceData([0x00, 0xEB] + Array(1...10) + instance)
        }
    } else {
        let iBeacon = IBeacon(
            uuidHigh: 0xE2C5_6DB5_DFFB_48D2, uuidLow: 0xB060_D0F5_A710_96E0, major: 1, minor: UInt16(beacon),
            measuredPower: -59)
        data = flags + [0x1A, 0xFF, 0x4C, 0x00] + iBeacon.payload
    }
    let event = AdvertisingReportDecoder.legacyReportEvent(address: address, rssi: rssi, data: data)
    out.append(contentsOf: BtsnoopWriter.record(kind: .event, received: true, packet: event, timestamp: time))
}
try out.write(to: URL(fileURLWithPath: arguments[1]))
print("\(total) adverts over \(seconds) s written to \(arguments[1])")
