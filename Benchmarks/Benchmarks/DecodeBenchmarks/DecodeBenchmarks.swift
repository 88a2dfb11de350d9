import Foundation
import BeaconWire
import BenchmarkCorpus
import Benchmark
import CReferenceDecoder

/// Each iteration decodes the whole corpus once, so throughput is `adverts / wall-clock time`, and
/// `mallocCountTotal / adverts` is the allocations per advert.
let advertCount = 1_000_000

/// Walks the corpus the way the C reference does (one contiguous buffer, each payload a slice of it), and each
/// payload the way the agent does: its classification into one result kept from advert to advert, identity frames
/// decoded and data frames carried as bytes.
/// With `decodingDataFrames`, each Eddystone data frame is then decoded as the ingest does it (and with
/// `expandingURLs` a URL's text read).
@inline(never)
func decodeAll(_ corpus: Corpus, decodingDataFrames: Bool = false, expandingURLs: Bool = false) -> Int {
    var checksum = 0
    var advert = ClassifiedAdvertisement()
    corpus.bytes.withUnsafeBytes { bytes in
        for index in 0..<corpus.count {
            let start = corpus.offsets[index]
            let payload = UnsafeRawBufferPointer(rebasing: bytes[start..<(start + Int(corpus.lengths[index]))])
            do {
                try FrameClassifier.classify(payload, into: &advert)
            } catch {
                checksum &+= 1
                continue
            }
            switch advert.identity {
            case .eddystoneUID(let uid)?: checksum &+= Int(uid.txPower) &+ Int(uid.instance & 0xFF)
            case .iBeacon(let beacon)?: checksum &+= Int(beacon.major)
            default: break
            }
            if advert.data.isEmpty { continue }
            for case .eddystone(let frame) in advert.data {
                checksum &+= frame.count &+ Int(frame.last ?? 0)
                guard decodingDataFrames else { continue }
                switch try? Eddystone.decode(Array(frame)[...]) {
                case .eddystoneTLM(let tlm)?: checksum &+= Int(tlm.advertisingCount)
                case .eddystoneURL(let url)?: checksum &+= expandingURLs ? url.url.utf8.count : Int(url.encodedCount)
                default: checksum &+= 1
                }
            }
        }
    }
    return checksum
}

/// A busy site's 1 s batch as an agent seals it: 1,000 sightings of 150 beacons (a third each Eddystone, iBeacon and
/// AltBeacon, random static addresses), about 1 ms apart, RSSI -95 to -45 dBm, every tenth Eddystone sighting with
/// a TLM frame.
func busyBatch(formatVersion: UInt32) -> WireBatch {
    var random: UInt64 = 0x9E37_79B9_7F4A_7C15
    func next(_ bound: Int) -> Int {
        random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Int((random >> 33) % UInt64(bound))
    }
    let beacons = (0..<150).map { index -> BeaconKey in
        let address = UInt64(0xC000_0000_0000) | UInt64(next(1 << 30)) << 16 | UInt64(index)
        let id = switch index % 3 {
        case 0: "eddystone:0102030405060708090a:" + String(format: "%012x", index)
        case 1: "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:\(index)"
        default: "altbeacon:00112233445566778899aabbccddeeff:2:\(index)"
        }
        return BeaconKey(beaconID: id, address: address, addressIsRandom: true, powerAt1mDbm: -59)
    }
    var configuration = BatchBuilder.Configuration()
    configuration.formatVersion = formatVersion
    var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 1, configuration: configuration)
    var time: Int64 = 1_767_225_600_000_000
    for index in 0..<1000 {
        time += Int64(500 + next(1000))
        let beacon = beacons[next(beacons.count)]
        let tlm: DataFrameContent? = beacon.beaconID.hasPrefix("eddystone") && index % 10 == 0
            ? .eddystone([0x20, 0x00, 0x0B, 0xB8, 0x17, 0x00, 0x00, 0x00, 0x10, UInt8(index & 0xFF), 0x00, 0x00, 0x20, UInt8(index & 0xFF)])
            : nil
        _ = builder.add(Sighting(timeMicros: time, beacon: beacon, rssi: Int8(-95 + next(51)), data: tlm), nowNanoseconds: 0)
    }
    return builder.seal(sequence: 1, firstUnacknowledgedSequence: 1, agentClockMicros: time)!
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident],
        timeUnits: .milliseconds,
        warmupIterations: 1,
        scalingFactor: .one,
        maxDuration: .seconds(20),
        maxIterations: 10
    )

    let mixed = Corpus(count: advertCount)
    Benchmark("Swift classify 1M mixed adverts") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(decodeAll(mixed)) }
    }
    Benchmark("Swift classify 1M mixed adverts and decode their data frames") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(decodeAll(mixed, decodingDataFrames: true)) }
    }
    Benchmark("C reference decode 1M mixed adverts") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(mixed.bytes.withUnsafeBufferPointer { bytes in
                mixed.lengths.withUnsafeBufferPointer { lengths in
                    reference_decode_all(bytes.baseAddress, lengths.baseAddress, mixed.count)
                }
            })
        }
    }
    for (name, mix) in [("UID", Corpus.Mix.uid), ("TLM", .tlm), ("iBeacon", .iBeacon), ("URL", .url)] {
        let corpus = Corpus(count: advertCount, mix: mix)
        Benchmark("Swift classify 1M \(name) adverts") { benchmark in
            for _ in benchmark.scaledIterations { blackHole(decodeAll(corpus)) }
        }
    }
    let urls = Corpus(count: advertCount, mix: .url)
    // The C reference writes the URL text for every frame; the Swift frame expands it only when read.
    Benchmark("Swift classify 1M URL adverts, decode them and expand their text") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(decodeAll(urls, decodingDataFrames: true, expandingURLs: true)) }
    }

    // Eddystone-EID: ten minutes of a site with 20 registered keys without their rotation exponent (the sites
    // file's), each new EID of one of them heard a second apart, resolved by the resolver (its candidates indexed by
    // value) and by the keyring alone (every candidate computed and compared), the reference.
    let keyring = EddystoneKeyring(
        identities: (0..<20).map { index in
            EddystoneIdentity(beaconID: "tag-\(index)", identityKey: (0..<16).map { UInt8(truncatingIfNeeded: index &* 31 &+ $0 &* 7) })
        })
    let eidStart: Int64 = 1_700_000_000
    let heard = (0..<600).map { second -> UInt64 in
        let identity = keyring.identities[second % 20]
        // K = 4: a new EID every 16 s, each beacon's EIDs new as it is heard.
        return EddystoneKeyring.eid(identityKey: identity.identityKey, rotationExponent: 4, beaconTime: UInt32(eidStart + Int64(second)))
    }
    Benchmark("Resolve 600 new EIDs of 20 keys without K, a second apart: indexed") { benchmark in
        for _ in benchmark.scaledIterations {
            var resolver = EIDResolver(keyring: keyring)
            for (second, eid) in heard.enumerated() {
                blackHole(resolver.resolve(eid: eid, unixSeconds: eidStart + Int64(second), remembering: true))
            }
        }
    }
    Benchmark("Resolve 600 new EIDs of 20 keys without K, a second apart: every candidate tried") { benchmark in
        for _ in benchmark.scaledIterations {
            for (second, eid) in heard.enumerated() { blackHole(keyring.resolve(eid: eid, unixSeconds: eidStart + Int64(second))) }
        }
    }

    // The batch format: what version 2's compression costs the agent (encoding) and the ingest (decoding), per
    // batch of 1,000 sightings; 1,000 batches per iteration.
    for version: UInt32 in [1, 2, 3] {
        let batch = busyBatch(formatVersion: version)
        let bytes = try! batch.wireBytes()
        Benchmark("Encode 1,000 busy 1 s batches, format version \(version) (\(bytes.count) bytes each)") { benchmark in
            for _ in benchmark.scaledIterations {
                for _ in 0..<1000 { blackHole(try! batch.wireBytes().count) }
            }
        }
        Benchmark("Decode 1,000 busy 1 s batches, format version \(version)") { benchmark in
            for _ in benchmark.scaledIterations {
                for _ in 0..<1000 { blackHole(try! BatchReader.decode(bytes).sightings.count) }
            }
        }
    }
}
