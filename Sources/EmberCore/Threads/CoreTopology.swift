import Foundation

/// Which logical CPUs are performance cores and which are efficiency cores, as Linux describes them in sysfs
/// (see `docs/QOS.md`, "Performance and efficiency cores").
///
/// Three sources, tried in this order:
/// - **Intel hybrid**: `/sys/devices/cpu_core/cpus` (performance) and `/sys/devices/cpu_atom/cpus` (efficiency),
///   two cpulists such as `0-7,16-19`. Both must be readable and non-empty.
/// - **ARM big.LITTLE / DynamIQ**: `/sys/devices/system/cpu/cpu<N>/cpu_capacity`, each CPU's capacity scaled so
///   the largest is 1024. CPUs at the highest capacity found are performance cores, every lower one an efficiency
///   core — with three tiers (say 1024 / 768 / 256) only the top one is "performance": the middle cores are not the
///   fastest, so interactive work is not sent there, and background work may use them as it uses the little ones.
/// - **Homogeneous** otherwise (no such files, or all capacities equal): every online CPU is a performance core.
///
/// `/sys/devices/system/cpu/online` says which CPUs exist and are online; CPUs outside it are left out of every
/// list. Content that cannot be trusted (garbage, negative or huge numbers, empty files, backwards ranges) is
/// ignored, never fatal: ``notes`` says what was read and what was ignored, and why.
public struct CoreTopology: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Where the split between performance and efficiency cores came from.
    public enum Kind: String, Sendable, Equatable, Codable {
        /// All cores alike (or nothing says otherwise): every online CPU is a performance core.
        case homogeneous
        /// ARM: per-CPU `cpu_capacity`; the highest capacity is performance, every lower one efficiency.
        case armCapacity
        /// Intel hybrid: `cpu_core` (performance) and `cpu_atom` (efficiency) cpulists.
        case intelHybrid
    }

    /// Where the split came from.
    public var kind: Kind
    /// The performance cores' logical CPU numbers, ascending (every online CPU on a homogeneous machine).
    public var performance: [Int]
    /// The efficiency cores' logical CPU numbers, ascending (empty on a homogeneous machine).
    public var efficiency: [Int]
    /// What was read, and anything malformed that was ignored (file, value found, value expected).
    public var notes: [String]

    /// CPU numbers this large or larger are refused as malformed: above any kernel's `NR_CPUS` (at most 8192),
    /// and a bound on what a hostile range such as `0-99999999999` could make us allocate.
    public static let cpuLimit = 8192

    /// A topology as given (tests, or a host that knows its machine better); the lists are sorted and de-duplicated.
    public init(kind: Kind, performance: [Int], efficiency: [Int], notes: [String] = []) {
        self.kind = kind
        self.performance = Array(Set(performance)).sorted()
        self.efficiency = Array(Set(efficiency)).sorted()
        self.notes = notes
    }

    /// Whether there are both performance and efficiency cores (then ``WorkerPool`` pins workers to them).
    public var isHeterogeneous: Bool { kind != .homogeneous && !performance.isEmpty && !efficiency.isEmpty }

    /// Every CPU, performance and efficiency, ascending.
    public var all: [Int] { Array(Set(performance).union(efficiency)).sorted() }

    /// One line for `ember info`: "4 performance + 4 efficiency cores (cpu_capacity)", "2 cores, all alike".
    public var description: String {
        switch kind {
        case .homogeneous:
            let count = all.count
            return count == 1 ? "1 core" : "\(count) cores, all alike"
        case .armCapacity:
            return "\(performance.count) performance + \(efficiency.count) efficiency cores (cpu_capacity)"
        case .intelHybrid:
            return "\(performance.count) performance + \(efficiency.count) efficiency cores (Intel hybrid: cpu_core / cpu_atom)"
        }
    }

    /// The CPUs work of `qos` should run on: `.background` and `.utility` on the efficiency cores (all cores when
    /// there are none), `.userInteractive` and `.userInitiated` on the performance cores, `.default` (and
    /// `.unspecified`) on all of them.
    public func cores(for qos: QoSClass) -> [Int] {
        switch qos.resolved {
        case .background, .utility:
            return efficiency.isEmpty ? all : efficiency
        case .userInteractive, .userInitiated:
            return performance.isEmpty ? all : performance
        case .default, .unspecified:
            return all
        }
    }

    // MARK: Reading sysfs

    /// The topology of the machine whose sysfs is under `sysfsRoot` ("/" for this one; tests pass a fake tree).
    /// Never throws: unreadable or malformed files are ignored, and ``notes`` says which.
    public static func read(sysfsRoot: String = "/") -> CoreTopology {
        let root = URL(fileURLWithPath: sysfsRoot.isEmpty ? "/" : sysfsRoot, isDirectory: true)
        func path(_ relative: String) -> String { root.appendingPathComponent(relative).path }
        var notes: [String] = []

        // Which CPUs exist and are online.
        let onlinePath = path("sys/devices/system/cpu/online")
        let online = readCPUList(at: onlinePath, notes: &notes)
        if let online { notes.append("\(onlinePath): \(online.count) online") }
        func keepOnline(_ cpus: [Int]) -> [Int] {
            guard let online else { return cpus }
            let allowed = Set(online)
            return cpus.filter { allowed.contains($0) }
        }

        // Intel hybrid: the two PMU folders list their CPUs.
        let corePath = path("sys/devices/cpu_core/cpus"), atomPath = path("sys/devices/cpu_atom/cpus")
        let coreList = readCPUList(at: corePath, notes: &notes), atomList = readCPUList(at: atomPath, notes: &notes)
        if let cores = coreList, let atoms = atomList {
            let performance = keepOnline(cores)
            let both = Set(performance)
            let efficiency = keepOnline(atoms).filter { !both.contains($0) }
            if atoms.contains(where: both.contains) {
                notes.append("\(atomPath): CPUs also in \(corePath) counted as performance only")
            }
            if !performance.isEmpty && !efficiency.isEmpty {
                notes.append("\(corePath): \(performance.count) performance; \(atomPath): \(efficiency.count) efficiency")
                return CoreTopology(kind: .intelHybrid, performance: performance, efficiency: efficiency, notes: notes)
            }
            notes.append("\(corePath), \(atomPath): no online CPU on one side; not hybrid")
        }

        // ARM: per-CPU capacity.
        let cpuFolder = path("sys/devices/system/cpu")
        let listed = ((try? FileManager.default.contentsOfDirectory(atPath: cpuFolder)) ?? []).compactMap(cpuNumber)
        var capacities: [Int: Int] = [:]
        var withoutCapacity: [Int] = []
        for cpu in keepOnline(listed).sorted() {
            let capacityPath = "\(cpuFolder)/cpu\(cpu)/cpu_capacity"
            guard let text = readSmallFile(capacityPath) else {
                withoutCapacity.append(cpu)
                continue
            }
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if isDigits(trimmed), let value = Int(trimmed), (1...1024).contains(value) {
                capacities[cpu] = value
            } else {
                notes.append("\(capacityPath): \(quoted(trimmed)) is not a capacity (an integer 1…1024); ignored")
            }
        }

        // Every CPU there is: the online list, else the cpu<N> folders, else the processor count.
        var everyCPU = online ?? listed.sorted()
        if everyCPU.isEmpty {
            let count = max(1, ProcessInfo.processInfo.activeProcessorCount)
            everyCPU = Array(0..<min(count, cpuLimit))
            notes.append("no usable \(onlinePath) and no \(cpuFolder)/cpu<N>: assumed CPUs 0-\(everyCPU.count - 1) "
                + "from the processor count")
        }

        if let top = capacities.values.max() {
            if !withoutCapacity.isEmpty {
                notes.append("no readable cpu_capacity for CPU \(withoutCapacity.map(String.init).joined(separator: ","))"
                    + ": counted as performance")
            }
            let efficiency = capacities.filter { $0.value < top }.map(\.key)
            if !efficiency.isEmpty {
                let tiers = Set(capacities.values).sorted(by: >)
                notes.append("\(cpuFolder)/cpu<N>/cpu_capacity: capacities \(tiers.map(String.init).joined(separator: " / "))"
                    + (tiers.count > 2 ? "; only \(top) counts as performance" : ""))
                let little = Set(efficiency)
                let performance = everyCPU.filter { !little.contains($0) }
                return CoreTopology(kind: .armCapacity, performance: performance, efficiency: efficiency, notes: notes)
            }
            notes.append("\(cpuFolder)/cpu<N>/cpu_capacity: all \(top)")
        }
        return CoreTopology(kind: .homogeneous, performance: everyCPU, efficiency: [], notes: notes)
    }

    /// The CPU numbers of a kernel cpulist ("0-7,16-19", "0-3,8,10-11", an optional trailing newline), ascending
    /// and without repeats; nil when malformed (a non-number, a sign, a backwards range such as "7-3", a number
    /// of ``cpuLimit`` or more). An empty string is the empty list, as the kernel prints one.
    public static func parseCPUList(_ text: String) -> [Int]? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.isEmpty { return [] }
        var cpus = Set<Int>()
        for piece in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
            let bounds = piece.trimmingCharacters(in: .whitespaces).split(separator: "-", omittingEmptySubsequences: false)
            guard bounds.count == 1 || bounds.count == 2 else { return nil }
            var numbers: [Int] = []
            for bound in bounds {
                let text = String(bound)
                guard isDigits(text), let value = Int(text), value < cpuLimit else { return nil }
                numbers.append(value)
            }
            guard let low = numbers.first, let high = numbers.last, low <= high else { return nil }
            cpus.formUnion(low...high)
        }
        return cpus.sorted()
    }

    /// The cpulist at `path`: nil when the file is absent (silently) or malformed or empty (with a note).
    private static func readCPUList(at path: String, notes: inout [String]) -> [Int]? {
        guard let text = readSmallFile(path) else { return nil }
        guard let cpus = parseCPUList(text) else {
            let shown = text.trimmingCharacters(in: .whitespacesAndNewlines)
            notes.append("\(path): \(quoted(shown)) is not a cpulist (like \"0-3,8,10-11\"); ignored")
            return nil
        }
        guard !cpus.isEmpty else {
            notes.append("\(path): empty; ignored")
            return nil
        }
        return cpus
    }

    /// The first 64 KiB of a file as text (sysfs files are a page at most; an empty file is ""), nil when it
    /// cannot be opened or read.
    static func readSmallFile(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        do {
            let data = try handle.read(upToCount: 1 << 16) ?? Data() // nil: at the end already, an empty file
            return String(decoding: data, as: UTF8.self)
        } catch {
            return nil
        }
    }

    /// N of a folder named "cpu<N>" (not "cpufreq", "cpuidle"), below ``cpuLimit``.
    private static func cpuNumber(_ name: String) -> Int? {
        guard name.hasPrefix("cpu") else { return nil }
        let digits = String(name.dropFirst(3))
        guard isDigits(digits), let value = Int(digits), value < cpuLimit else { return nil }
        return value
    }

    /// Non-empty and ASCII digits only (no sign, no spaces: `Int("+3")` would accept what the kernel never writes).
    static func isDigits(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// `text` in quotes for a note, cut to 40 characters.
    private static func quoted(_ text: String) -> String {
        let shown = text.count > 40 ? String(text.prefix(40)) + "…" : text
        return "\"\(shown)\""
    }
}
