import BeaconWire
import BenchmarkCorpus
import Benchmark
import CReferenceDecoder

/// Each iteration decodes the whole corpus once, so throughput is `adverts / wall-clock time`, and
/// `mallocCountTotal / adverts` is the allocations per advert.
let advertCount = 1_000_000

/// Walks the corpus the way the C reference does (one contiguous buffer, each payload a slice of it), and each
/// payload the way the pipeline does: the agent's classification, then the ingest's decoding of its data frames.
@inline(never)
func decodeAll(_ corpus: Corpus, expandingURLs: Bool = false) -> Int {
    var checksum = 0
    corpus.bytes.withUnsafeBytes { bytes in
        for index in 0..<corpus.count {
            let start = corpus.offsets[index]
            let payload = UnsafeRawBufferPointer(rebasing: bytes[start..<(start + Int(corpus.lengths[index]))])
            let advert: ClassifiedAdvertisement
            do {
                advert = try FrameClassifier.classify(payload)
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
                switch try? Eddystone.decode(frame[...]) {
                case .eddystoneTLM(let tlm)?: checksum &+= Int(tlm.advertisingCount)
                case .eddystoneURL(let url)?: checksum &+= expandingURLs ? url.url.utf8.count : Int(url.encodedCount)
                default: checksum &+= 1
                }
            }
        }
    }
    return checksum
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
    Benchmark("Swift decode 1M mixed adverts") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(decodeAll(mixed)) }
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
        Benchmark("Swift decode 1M \(name) adverts") { benchmark in
            for _ in benchmark.scaledIterations { blackHole(decodeAll(corpus)) }
        }
    }
    let urls = Corpus(count: advertCount, mix: .url)
    // The C reference writes the URL text for every frame; the Swift frame expands it only when read.
    Benchmark("Swift decode 1M URL adverts and expand their text") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(decodeAll(urls, expandingURLs: true)) }
    }
}
