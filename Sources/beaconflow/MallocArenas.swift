import CMalloc
import Foundation

/// glibc's allocator gives threads that contend for memory arenas of their own, up to eight per core, and each
/// arena keeps what was freed in it for its own reuse: the ingest's writer, broker and task threads each hold
/// memory the others cannot use. With two arenas the ingest holding 100,000 beacons peaks about 15 % lower
/// (BENCHMARKS.md), for the same CPU.
enum MallocArenas {
    /// The ingest's arenas.
    static let ingest: Int32 = 2

    /// Limits the arenas to `count`, unless the environment chose (`MALLOC_ARENA_MAX`, or `GLIBC_TUNABLES` naming
    /// `glibc.malloc.arena_max`). Called first thing, before the threads that allocate start.
    static func limit(to count: Int32) {
        let environment = ProcessInfo.processInfo.environment
        guard environment["MALLOC_ARENA_MAX"] == nil, environment["GLIBC_TUNABLES"]?.contains("glibc.malloc.arena_max") != true else {
            return
        }
        mallopt(M_ARENA_MAX, count)
    }
}
