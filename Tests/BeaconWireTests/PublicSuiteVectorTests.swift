import Testing
@testable import BeaconWire

/// Whole HCI events of public decoder suites, through the HCI decoder, the advertising data and the frame decoders
/// to `sensor_readings` rows: the values those suites expect, in this project's quantities and units.
@Suite struct PublicSuiteVectorTests {
    /// The readings of every frame of one HCI event (hex as the suite gives it, after the H4 packet type 0x04).
    func readings(event hex: String) throws -> [String: Double] {
        var reports = AdvertisingReportDecoder()
        var decoder = FrameDecoder()
        var readings: [String: Double] = [:]
        for report in try reports.reports(fromEvent: bytes(String(hex.dropFirst(2)))) {
            for frame in try decoder.frames(in: AdvertisingData(parsing: report.data), address: report.address, unixSeconds: 0) {
                for reading in frame.sensorReadings { readings["\(reading.quantity) \(reading.unit)"] = reading.value }
            }
        }
        return readings
    }

    func expect(_ readings: [String: Double], _ expected: [String: Double], sourceLocation: SourceLocation = #_sourceLocation) {
        for (key, value) in expected {
            let found: Double? = readings[key]
            let close = found.map { abs($0 - value) < 1e-6 } ?? false
            let shown = found.map { "\($0)" } ?? "missing"
            #expect(close, "\(key): \(shown), expected \(value)", sourceLocation: sourceLocation)
        }
    }

    /// github.com/custom-components/ble_monitor, custom_components/ble_monitor/test/test_atc_parser.py at b745d2a5:
    /// ATC1441 (legacy and extended report) and the custom (pvvx) layout, before and after firmware 2.9.
    @Test func atcAndPvvxThermometersOfBleMonitor() throws {
        expect(try readings(event: "043e1d02010000f4830238c1a41110161a18a4c1380283f400a22f5f0bf819df"), [
            "temperature celsius": 16.2, "humidity percent": 47, "battery_voltage millivolt": 3064, "battery percent": 95,
            "frame_counter count": 25,
        ])
        expect(try readings(event: "043E2B0D011300004E7CBC38C1A40100FF7FB90000000000000000001110161A18A4C138BC7C4E0102284F0B6720"), [
            "temperature celsius": 25.8, "humidity percent": 40, "battery_voltage millivolt": 2919, "battery percent": 79,
            "frame_counter count": 32,
        ])
        expect(try readings(event: "043e1f02010000f4830238c1a41312161a18f4830238c1a4a9066911b60b58f70dde"), [
            "temperature celsius": 17.05, "humidity percent": 44.57, "battery_voltage millivolt": 2998, "battery percent": 88,
            "frame_counter count": 247,
        ])
        expect(try readings(event: "043E2202010000B2188D38C1A41602010612161A18B2188D38C1A42B089011F70A43200FC2"), [
            "temperature celsius": 20.91, "humidity percent": 44.96, "battery_voltage millivolt": 2807, "battery percent": 67,
            "frame_counter count": 32,
        ])
    }

    /// ble_monitor, test_ruuvitag_parser.py at 7b25b3a5: RAWv1 sent with four bytes after its 14 (read as the
    /// specification's 14, the rest ignored) and RAWv2.
    @Test func ruuviTagsOfBleMonitor() throws {
        let rawV1 = try readings(event: "043E2502010301F27A52FAD4CD1902010415FF990403291A1ECE1EFC18F94202CA0B53000000009E")
        expect(rawV1, [
            "temperature celsius": 26.3, "humidity percent": 20.5, "pressure hectopascal": 1027.66,
            "acceleration_x metre_per_second_squared": -1.000 * 9.80665, "acceleration_y metre_per_second_squared": -1.726 * 9.80665,
            "acceleration_z metre_per_second_squared": 0.714 * 9.80665, "battery_voltage millivolt": 2899,
        ])
        let rawV2 = try readings(event: "043E2B02010301F27A52FAD4CD1F0201061BFF990405138A5F61C4F0FFE4FFDC0414C5B6EC29B3F27A52FAD4CDBC")
        expect(rawV2, [
            // The suite rounds the humidity to 61.04; RAWv2 resolves 0.0025 %.
            "temperature celsius": 25.01, "humidity percent": 61.0425, "pressure hectopascal": 1004.16,
            "acceleration_x metre_per_second_squared": -0.028 * 9.80665, "acceleration_y metre_per_second_squared": -0.036 * 9.80665,
            "acceleration_z metre_per_second_squared": 1.044 * 9.80665, "battery_voltage millivolt": 3181, "tx_power dbm": 4,
            "measurement_sequence count": 10675,
        ])
    }
}
