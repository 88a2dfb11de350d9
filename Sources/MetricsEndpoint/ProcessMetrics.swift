#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MetricFamilies

/// The process's own figures, read from /proc at each scrape under the names Prometheus client libraries use.
public enum ProcessMetrics {
    static let cpu = MetricFamily("process_cpu_seconds_total", .counter, help: "User and system CPU time spent, in seconds.")
    static let resident = MetricFamily("process_resident_memory_bytes", .gauge, help: "Resident memory size, in bytes.")
    static let virtual = MetricFamily("process_virtual_memory_bytes", .gauge, help: "Virtual memory size, in bytes.")
    static let openFDs = MetricFamily("process_open_fds", .gauge, help: "Open file descriptors.")
    static let maxFDs = MetricFamily("process_max_fds", .gauge, help: "The limit of open file descriptors.")
    static let startTime = MetricFamily(
        "process_start_time_seconds", .gauge, help: "When the process started, in seconds since the Unix epoch.")

    public static let all: [MetricFamily] = [cpu, resident, virtual, openFDs, maxFDs, startTime]

    /// The families in the Prometheus text format; those /proc cannot give are left out.
    static func exposition() -> String {
        var values: [(MetricFamily, Double)] = []
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        if let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        {
            // The fields after the command's closing parenthesis, from the state (field 3 of proc(5)) on.
            let fields = stat[stat.index(after: end)...].split(separator: " ")
            func field(_ number: Int) -> Double? { fields.count > number - 3 ? Double(fields[number - 3]) : nil }
            if let user = field(14), let system = field(15) { values.append((cpu, (user + system) / ticks)) }
            if let bootTime = bootTime(), let started = field(22) { values.append((startTime, bootTime + started / ticks)) }
            if let size = field(23) { values.append((virtual, size)) }
            if let pages = field(24) { values.append((resident, pages * Double(sysconf(Int32(_SC_PAGESIZE))))) }
        }
        if let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            // Less the descriptor that read the directory.
            values.append((openFDs, Double(max(0, entries.count - 1))))
        }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max {
            values.append((maxFDs, Double(limit.rlim_cur)))
        }
        var text = ""
        for (family, value) in values {
            text += "# HELP \(family.name) \(family.help)\n# TYPE \(family.name) \(family.kind.rawValue)\n"
            text += "\(family.name) \(value)\n"
        }
        return text
    }

    /// Seconds since the epoch at boot (`btime` in /proc/stat).
    private static func bootTime() -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8) else { return nil }
        let line = stat.split(separator: "\n").first { $0.hasPrefix("btime ") }
        return line.flatMap { Double($0.dropFirst(6)) }
    }
}
