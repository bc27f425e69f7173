import Foundation

/// How much memory this process may use: the machine's memory, or its control group's limit when that is lower
/// (a container, a systemd unit with `MemoryMax=`, a job scheduler's cgroup).
///
/// The cgroup's limit is read the way the kernel applies it: from `/proc/self/cgroup`, the process's group in the
/// v2 hierarchy (`memory.max`) or the v1 memory controller (`memory.limit_in_bytes`), and every ancestor up to the
/// root, the lowest limit winning. Where the group's path is not visible (a container whose cgroup namespace hides
/// it), the limit at the mount point is the container's own. "max" or the v1 "no limit" value (close to 2^63)
/// means no limit; an unreadable or malformed file is no limit too — the limit only ever lowers the default budget.
public struct MemoryLimit: Sendable, Equatable, CustomStringConvertible {
    /// Bytes of physical memory in the machine.
    public var physicalBytes: Int
    /// The lowest memory limit of the process's control group and its ancestors, in bytes; nil without one.
    public var cgroupBytes: Int?

    /// A limit from known figures.
    public init(physicalBytes: Int, cgroupBytes: Int?) {
        self.physicalBytes = physicalBytes
        self.cgroupBytes = cgroupBytes
    }

    /// The limit of this process: `ProcessInfo`'s physical memory and the cgroup limit read under `root`
    /// (`/` on a real system; a directory laid out like one in tests).
    public static func current(root: URL = URL(fileURLWithPath: "/")) -> MemoryLimit {
        MemoryLimit(physicalBytes: Int(clamping: ProcessInfo.processInfo.physicalMemory),
                    cgroupBytes: cgroupLimit(root: root))
    }

    /// The bytes the process may use: the lower of the machine's memory and the cgroup's limit.
    public var bytes: Int { min(physicalBytes, cgroupBytes ?? .max) }

    /// The default working-memory budget (``Runtime/Configuration/memoryBudget``): a quarter of the machine's memory
    /// (it is shared with other programs), or half of a lower cgroup limit (the group is the process's own; the other
    /// half holds the weights and the runtime), whichever is lower.
    public var defaultBudget: Int {
        let machineShare = physicalBytes / 4
        guard let cgroupBytes else { return machineShare }
        return min(machineShare, cgroupBytes / 2)
    }

    /// One line for logs and `ember info`.
    public var description: String {
        let physical = "\(physicalBytes / 1_000_000) MB of memory"
        guard let cgroupBytes else { return "\(physical), no cgroup limit" }
        return "\(physical), cgroup limit \(cgroupBytes / 1_000_000) MB"
    }

    // MARK: - Reading the control group

    /// Limits at or above this are the v1 way of saying "none" (the kernel writes 2^63 rounded down to a page).
    static let unlimitedThreshold = 1 << 62

    /// The lowest limit over the process's cgroup and its ancestors, in the v2 hierarchy and the v1 memory controller.
    static func cgroupLimit(root: URL) -> Int? {
        guard let membership = try? String(contentsOf: root.appendingPathComponent("proc/self/cgroup"), encoding: .utf8) else {
            return nil
        }
        let cgroupRoot = root.appendingPathComponent("sys/fs/cgroup")
        var limits: [Int] = []
        for line in membership.split(separator: "\n") {
            // "hierarchy-id:controllers:path"; the path may itself contain ':'.
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3, fields[2].hasPrefix("/") else { continue }
            let path = String(fields[2])
            if fields[0] == "0" && fields[1].isEmpty {
                // cgroup v2: the unified hierarchy, mounted at /sys/fs/cgroup (or /sys/fs/cgroup/unified beside v1).
                for mount in [cgroupRoot, cgroupRoot.appendingPathComponent("unified")] {
                    if let limit = lowestLimit(mount: mount, path: path, file: "memory.max") { limits.append(limit) }
                }
            } else if fields[1].split(separator: ",").contains("memory") {
                let mount = cgroupRoot.appendingPathComponent("memory")
                if let limit = lowestLimit(mount: mount, path: path, file: "memory.limit_in_bytes") { limits.append(limit) }
            }
        }
        return limits.min()
    }

    /// The lowest limit in `file` from the group at `path` under `mount` up to the mount itself; the mount's own
    /// file alone when the group's folder is not visible there.
    static func lowestLimit(mount: URL, path: String, file: String) -> Int? {
        var components = path.split(separator: "/").map(String.init)
        let groupVisible = FileManager.default.fileExists(atPath: components.reduce(mount) { $0.appendingPathComponent($1) }.path)
        if !groupVisible { components = [] }
        var lowest: Int?
        while true {
            let folder = components.reduce(mount) { $0.appendingPathComponent($1) }
            if let limit = readLimit(folder.appendingPathComponent(file)) { lowest = min(lowest ?? .max, limit) }
            if components.isEmpty { break }
            components.removeLast()
        }
        return lowest
    }

    /// A limit file's value in bytes; nil for "max", the v1 "unlimited" value, a missing or malformed file.
    static func readLimit(_ url: URL) -> Int? {
        guard let handle = try? FileHandle(forReadingFrom: url) else { return nil }
        defer { try? handle.close() }
        // Limit files are one short line; read little whatever the file claims to be.
        guard let data = try? handle.read(upToCount: 64), let text = String(data: data, encoding: .utf8) else { return nil }
        let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let bytes = Int(value), bytes > 0, bytes < unlimitedThreshold else { return nil }
        return bytes
    }
}
