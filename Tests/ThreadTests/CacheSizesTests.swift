import Foundation
import Testing
@testable import EmberCore
import EmberTestSupport

/// The cache sizes a benchmark sizes its cold buffers by, read from fake sysfs trees (``FakeFileTree``).
@Suite("Cache sizes from sysfs")
struct CacheSizesTests {
    static func cache(_ index: Int, level: String, type: String, size: String, in tree: FakeFileTree) throws {
        let folder = "sys/devices/system/cpu/cpu0/cache/index\(index)"
        try tree.write("\(folder)/level", level + "\n")
        try tree.write("\(folder)/type", type + "\n")
        try tree.write("\(folder)/size", size + "\n")
    }

    @Test func xeonWithAHugeLastLevel() throws {
        let sysfs = try FakeFileTree(name: "caches-xeon")
        try Self.cache(0, level: "1", type: "Data", size: "48K", in: sysfs)
        try Self.cache(1, level: "1", type: "Instruction", size: "32K", in: sysfs)
        try Self.cache(2, level: "2", type: "Unified", size: "2048K", in: sysfs)
        try Self.cache(3, level: "3", type: "Unified", size: "266240K", in: sysfs)
        let caches = CacheSizes.read(sysfsRoot: sysfs.root.path)
        #expect(caches.bytesByLevel == [1: 48 << 10, 2: 2 << 20, 3: 260 << 20])
        #expect(caches.lastLevelBytes == 260 << 20)
        // four times the last level, past the 256 MiB floor a 32 MiB L3 was served by
        #expect(caches.coldBytes(atLeast: 256 << 20) == 1040 << 20)
    }

    @Test func smallCachesKeepTheFloor() throws {
        let sysfs = try FakeFileTree(name: "caches-phone")
        try Self.cache(0, level: "1", type: "Data", size: "64K", in: sysfs)
        try Self.cache(2, level: "2", type: "Unified", size: "4M", in: sysfs)
        let caches = CacheSizes.read(sysfsRoot: sysfs.root.path)
        #expect(caches.lastLevelBytes == 4 << 20)
        #expect(caches.coldBytes(atLeast: 256 << 20) == 256 << 20)
    }

    @Test func missingOrMalformedEntriesAreLeftOut() throws {
        let empty = try FakeFileTree(name: "caches-none")
        #expect(CacheSizes.read(sysfsRoot: empty.root.path).lastLevelBytes == nil)
        #expect(CacheSizes.read(sysfsRoot: empty.root.path).coldBytes(atLeast: 512 << 20) == 512 << 20)
        let odd = try FakeFileTree(name: "caches-odd")
        try Self.cache(0, level: "1", type: "Data", size: "32K", in: odd)
        try Self.cache(1, level: "3", type: "Unified", size: "lots", in: odd)
        try Self.cache(2, level: "x", type: "Unified", size: "8M", in: odd)
        try Self.cache(3, level: "2", type: "Instruction", size: "8M", in: odd)
        #expect(CacheSizes.read(sysfsRoot: odd.root.path).bytesByLevel == [1: 32 << 10])
    }

    @Test func sizesParseAsSysfsWritesThem() {
        #expect(CacheSizes.parseSize("48K") == 48 << 10)
        #expect(CacheSizes.parseSize("32M") == 32 << 20)
        #expect(CacheSizes.parseSize("1G") == 1 << 30)
        #expect(CacheSizes.parseSize("512") == 512)
        for bad in ["", "K", "-4K", "4k", "4 K", "99999999999999999999K"] { #expect(CacheSizes.parseSize(bad) == nil) }
    }
}
