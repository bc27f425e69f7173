import Foundation

/// The CPU's data caches as Linux describes them in sysfs: `/sys/devices/system/cpu/cpu0/cache/index<N>/` with
/// `level`, `type` (Data, Instruction, Unified) and `size` ("48K", "2048K", "32M"). What a benchmark needs to be
/// sure its data come from memory: a buffer read over and over must be several times the last level, and some
/// machines' last level is hundreds of MiB (an Emerald Rapids VM shows 260 MiB), not the 32 MiB of a desktop.
public struct CacheSizes: Sendable, Equatable {
    /// Bytes of each data or unified cache level of CPU 0, by level (1, 2, 3 …); instruction caches left out.
    public var bytesByLevel: [Int: Int]

    /// A description of caches by level, in bytes.
    public init(bytesByLevel: [Int: Int]) {
        self.bytesByLevel = bytesByLevel
    }

    /// Bytes of the highest level (the last-level cache), nil when sysfs says nothing.
    public var lastLevelBytes: Int? { bytesByLevel.max { $0.key < $1.key }?.value }

    /// How many bytes a buffer must span so that reading it through once more finds (next to) nothing in the
    /// caches: four times the last level, and never less than `floor` (what a benchmark used before it knew).
    public func coldBytes(atLeast floor: Int) -> Int {
        guard let last = lastLevelBytes, last > 0, last <= Int.max / 4 else { return floor }
        return max(floor, 4 * last)
    }

    /// The caches of CPU 0 of the machine whose sysfs is under `sysfsRoot` ("/" for this one; tests pass a fake
    /// tree). Never throws: missing or malformed entries are left out (an empty result when none is readable).
    public static func read(sysfsRoot: String = "/") -> CacheSizes {
        let root = URL(fileURLWithPath: sysfsRoot.isEmpty ? "/" : sysfsRoot, isDirectory: true)
        let folder = root.appendingPathComponent("sys/devices/system/cpu/cpu0/cache")
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        var bytes: [Int: Int] = [:]
        for entry in entries where entry.hasPrefix("index") {
            let index = folder.appendingPathComponent(entry)
            func field(_ name: String) -> String? {
                CoreTopology.readSmallFile(index.appendingPathComponent(name).path)?
                    .trimmingCharacters(in: .whitespacesAndNewlines)
            }
            guard let level = field("level").flatMap({ Int($0) }), (1...8).contains(level),
                  field("type") != "Instruction", let size = field("size").flatMap(parseSize) else { continue }
            bytes[level] = max(bytes[level] ?? 0, size)
        }
        return CacheSizes(bytesByLevel: bytes)
    }

    /// Bytes of a sysfs cache size: digits with an optional K, M or G suffix (binary multiples); nil otherwise.
    public static func parseSize(_ text: String) -> Int? {
        var digits = Substring(text), scale = 1
        switch text.last {
        case "K": scale = 1 << 10; digits = digits.dropLast()
        case "M": scale = 1 << 20; digits = digits.dropLast()
        case "G": scale = 1 << 30; digits = digits.dropLast()
        default: break
        }
        guard CoreTopology.isDigits(String(digits)), let value = Int(digits), value <= Int.max / scale else { return nil }
        return value * scale
    }
}
