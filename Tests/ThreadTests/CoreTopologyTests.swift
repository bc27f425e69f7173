import Foundation
import Testing
import _CEmberThreads
@testable import EmberCore
import EmberTestSupport

/// The CPUs thread `tid` may run on (0: the calling thread), as the kernel reports them; empty when it cannot say.
private func cpuAffinity(of tid: Int32) -> [Int] {
    var cpus = [Int32](repeating: -1, count: 1024)
    let count = et_thread_affinity(tid, &cpus, Int32(cpus.count))
    guard count > 0 else { return [] }
    return cpus.prefix(Int(min(count, Int32(cpus.count)))).map(Int.init)
}

/// Every sysfs layout is a fake tree (``FakeFileTree``); only the last test pins real threads on this machine.
@Suite("Performance and efficiency cores")
struct CoreTopologyTests {
    /// Writes `cpu_capacity` for each CPU, and the online list.
    static func capacities(_ values: [String], online: String?, in tree: FakeFileTree) throws {
        if let online { try tree.write("sys/devices/system/cpu/online", online) }
        for (cpu, value) in values.enumerated() {
            try tree.write("sys/devices/system/cpu/cpu\(cpu)/cpu_capacity", value)
        }
    }

    @Test func armBigLittle() throws {
        let sysfs = try FakeFileTree(name: "big-little")
        try Self.capacities(Array(repeating: "1024\n", count: 4) + Array(repeating: "446\n", count: 4), online: "0-7\n",
                            in: sysfs)
        let topology = CoreTopology.read(sysfsRoot: sysfs.root.path)
        #expect(topology.kind == .armCapacity && topology.isHeterogeneous)
        #expect(topology.performance == [0, 1, 2, 3])
        #expect(topology.efficiency == [4, 5, 6, 7])
        #expect(topology.cores(for: .background) == [4, 5, 6, 7])
        #expect(topology.cores(for: .utility) == [4, 5, 6, 7])
        #expect(topology.cores(for: .userInitiated) == [0, 1, 2, 3])
        #expect(topology.cores(for: .userInteractive) == [0, 1, 2, 3])
        #expect(topology.cores(for: .default) == Array(0...7))
        #expect(topology.cores(for: .unspecified) == Array(0...7))
        #expect(topology.description == "4 performance + 4 efficiency cores (cpu_capacity)")
    }

    /// Offline CPUs are in no list, even with a capacity file.
    @Test func onlyOnlineCPUsCount() throws {
        let sysfs = try FakeFileTree(name: "big-little-offline")
        try Self.capacities(Array(repeating: "1024", count: 4) + Array(repeating: "446", count: 4), online: "0-5", in: sysfs)
        let topology = CoreTopology.read(sysfsRoot: sysfs.root.path)
        #expect(topology.performance == [0, 1, 2, 3])
        #expect(topology.efficiency == [4, 5])
    }

    /// Three tiers: only the top one is "performance"; the middle cores go with the little ones.
    @Test func threeTiersTopIsPerformanceRestEfficiency() throws {
        let sysfs = try FakeFileTree(name: "three-tiers")
        try Self.capacities(["1024"] + Array(repeating: "768", count: 3) + Array(repeating: "256", count: 4), online: "0-7",
                            in: sysfs)
        let topology = CoreTopology.read(sysfsRoot: sysfs.root.path)
        #expect(topology.kind == .armCapacity)
        #expect(topology.performance == [0])
        #expect(topology.efficiency == Array(1...7))
        #expect(topology.cores(for: .userInteractive) == [0])
        #expect(topology.notes.contains { $0.contains("1024 / 768 / 256") && $0.contains("only 1024 counts as performance") })
        #expect(topology.description == "1 performance + 7 efficiency cores (cpu_capacity)")
    }

    @Test func intelHybrid() throws {
        let sysfs = try FakeFileTree(name: "intel-hybrid")
        try sysfs.write("sys/devices/system/cpu/online", "0-15\n")
        try sysfs.write("sys/devices/cpu_core/cpus", "0-7\n")
        try sysfs.write("sys/devices/cpu_atom/cpus", "8-15\n")
        let topology = CoreTopology.read(sysfsRoot: sysfs.root.path)
        #expect(topology.kind == .intelHybrid)
        #expect(topology.performance == Array(0...7))
        #expect(topology.efficiency == Array(8...15))
        #expect(topology.cores(for: .background) == Array(8...15))
        #expect(topology.cores(for: .userInitiated) == Array(0...7))
        #expect(topology.description.hasPrefix("8 performance + 8 efficiency cores"))
    }

    /// Commas and single CPUs, and no online list (then every listed CPU counts).
    @Test func intelHybridWithCommasAndSingles() throws {
        let sysfs = try FakeFileTree(name: "intel-hybrid-commas")
        try sysfs.write("sys/devices/cpu_core/cpus", "0-3,8,10-11\n")
        try sysfs.write("sys/devices/cpu_atom/cpus", "4-7,9")
        let topology = CoreTopology.read(sysfsRoot: sysfs.root.path)
        #expect(topology.kind == .intelHybrid)
        #expect(topology.performance == [0, 1, 2, 3, 8, 10, 11])
        #expect(topology.efficiency == [4, 5, 6, 7, 9])
    }

    @Test func cpuListParser() {
        #expect(CoreTopology.parseCPUList("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11])
        #expect(CoreTopology.parseCPUList("0-7,16-19\n") == Array(0...7) + Array(16...19))
        #expect(CoreTopology.parseCPUList("5") == [5])
        #expect(CoreTopology.parseCPUList("3,1,1-2") == [1, 2, 3])
        #expect(CoreTopology.parseCPUList(" 0-1 \n") == [0, 1])
        #expect(CoreTopology.parseCPUList("") == [])
        #expect(CoreTopology.parseCPUList("\n") == [])
        for malformed in ["7-3", "a-b", "-5", "+3", "1,,2", "1-", "-", "0-1-2", "1 2", "0-99999999999",
                          "99999999999999999999", "0-3:2/4", "٣"] {
            #expect(CoreTopology.parseCPUList(malformed) == nil, "\(malformed)")
        }
    }

    @Test func emptyTreeIsHomogeneousOverTheOnlineList() throws {
        let sysfs = try FakeFileTree(name: "homogeneous")
        try sysfs.write("sys/devices/system/cpu/online", "0-1\n")
        let topology = CoreTopology.read(sysfsRoot: sysfs.root.path)
        #expect(topology.kind == .homogeneous && !topology.isHeterogeneous)
        #expect(topology.performance == [0, 1])
        #expect(topology.efficiency.isEmpty)
        #expect(topology.cores(for: .background) == [0, 1])
        #expect(topology.cores(for: .userInteractive) == [0, 1])
        #expect(topology.description == "2 cores, all alike")
    }

    @Test func equalCapacitiesAreHomogeneous() throws {
        let sysfs = try FakeFileTree(name: "equal-capacities")
        try Self.capacities(Array(repeating: "1024\n", count: 4), online: "0-3", in: sysfs)
        let topology = CoreTopology.read(sysfsRoot: sysfs.root.path)
        #expect(topology.kind == .homogeneous)
        #expect(topology.performance == [0, 1, 2, 3] && topology.efficiency.isEmpty)
        #expect(topology.description == "4 cores, all alike")
    }

    /// Garbage capacities are ignored with a note naming the file; their CPUs count as performance (no evidence
    /// they are slower), and the one valid lower capacity still makes an efficiency core.
    @Test func hostileCapacitiesAreIgnoredWithNotes() throws {
        let sysfs = try FakeFileTree(name: "hostile-capacity")
        try Self.capacities(["1024", "banana", "-5", "99999999999999999999", "", "446", "2048"], online: "0-6", in: sysfs)
        let topology = CoreTopology.read(sysfsRoot: sysfs.root.path)
        #expect(topology.kind == .armCapacity)
        #expect(topology.performance == [0, 1, 2, 3, 4, 6])
        #expect(topology.efficiency == [5])
        for cpu in [1, 2, 3, 4, 6] {
            #expect(topology.notes.contains { $0.contains("cpu\(cpu)/cpu_capacity") && $0.contains("ignored") },
                    "cpu\(cpu): \(topology.notes)")
        }
    }

    /// Only garbage: nothing to compare, so all alike.
    @Test func onlyHostileCapacitiesAreHomogeneous() throws {
        let sysfs = try FakeFileTree(name: "hostile-only")
        try Self.capacities(["banana", "", "-1"], online: "0-2", in: sysfs)
        let topology = CoreTopology.read(sysfsRoot: sysfs.root.path)
        #expect(topology.kind == .homogeneous && topology.performance == [0, 1, 2])
        #expect(topology.notes.count >= 3)
    }

    /// A malformed or empty cpulist is treated as absent, with a note naming its file.
    @Test func hostileCPUListsAreIgnoredWithNotes() throws {
        let sysfs = try FakeFileTree(name: "hostile-cpulist")
        try sysfs.write("sys/devices/system/cpu/online", "7-3\n")
        try sysfs.write("sys/devices/system/cpu/cpu0/cpu_capacity", "1024")
        try sysfs.write("sys/devices/system/cpu/cpu1/cpu_capacity", "1024")
        try sysfs.write("sys/devices/cpu_core/cpus", "a-b")
        try sysfs.write("sys/devices/cpu_atom/cpus", "")
        let topology = CoreTopology.read(sysfsRoot: sysfs.root.path)
        #expect(topology.kind == .homogeneous)
        #expect(topology.performance == [0, 1]) // from the cpu<N> folders, the online list being unusable
        #expect(topology.notes.contains { $0.contains("sys/devices/system/cpu/online") && $0.contains("\"7-3\"") })
        #expect(topology.notes.contains { $0.contains("sys/devices/cpu_core/cpus") && $0.contains("\"a-b\"") })
        #expect(topology.notes.contains { $0.contains("sys/devices/cpu_atom/cpus") && $0.contains("empty") })

        let huge = try FakeFileTree(name: "hostile-huge")
        try huge.write("sys/devices/system/cpu/online", "0-99999999999999\n")
        try huge.write("sys/devices/cpu_core/cpus", "0-4000000000")
        try huge.write("sys/devices/cpu_atom/cpus", "0-1")
        let hugeTopology = CoreTopology.read(sysfsRoot: huge.root.path)
        #expect(hugeTopology.kind == .homogeneous && !hugeTopology.performance.isEmpty)
        #expect(hugeTopology.notes.contains { $0.contains("online") })
    }

    @Test func codableRoundTrip() throws {
        let topology = CoreTopology(kind: .intelHybrid, performance: [3, 1, 1], efficiency: [2], notes: ["by hand"])
        #expect(topology.performance == [1, 3])
        let decoded = try JSONDecoder().decode(CoreTopology.self, from: JSONEncoder().encode(topology))
        #expect(decoded == topology)
    }

    /// No topology, or a homogeneous one: nothing is pinned and every class has all its workers.
    @Test func homogeneousTopologyPinsNothing() {
        let homogeneous = CoreTopology(kind: .homogeneous, performance: [0, 1], efficiency: [])
        let pool = WorkerPool(threadsPerClass: 2, topology: homogeneous)
        #expect(pool.cores(for: .background) == nil && pool.cores(for: .userInitiated) == nil)
        #expect(pool.workerCount(for: .utility) == 2)
        #expect(WorkerPool(threadsPerClass: 2).cores(for: .background) == nil)
    }

    #if os(Linux)
    /// The CPUs this process may run on (sched_getaffinity), read once.
    static let allowedCPUs = cpuAffinity(of: 0)

    /// Real threads on this machine: a topology made by hand from two CPUs this process may use, the first as
    /// "performance" and the second as "efficiency"; each class's workers must carry exactly its CPU in their mask.
    @Test(.enabled(if: ProcessInfo.processInfo.activeProcessorCount >= 2 && CoreTopologyTests.allowedCPUs.count >= 2,
                   "needs at least two CPUs this process may run on (sched_getaffinity)"))
    func workersArePinnedToTheirClassesCores() throws {
        let performance = Self.allowedCPUs[0], efficiency = Self.allowedCPUs[1]
        let topology = CoreTopology(kind: .armCapacity, performance: [performance], efficiency: [efficiency],
                                    notes: ["made by hand for the test"])
        let pool = WorkerPool(threadsPerClass: 2, topology: topology)
        #expect(pool.cores(for: .background) == [efficiency])
        #expect(pool.cores(for: .userInitiated) == [performance])
        #expect(pool.workerCount(for: .background) == 1)
        #expect(pool.workerCount(for: .userInitiated) == 1)
        let expected: [(QoSClass, Int)] = [(.background, efficiency), (.userInitiated, performance)]
        for (qos, cpu) in expected {
            let ids = pool.threadIDs(for: qos)
            #expect(ids.count == 1)
            for tid in ids { #expect(cpuAffinity(of: tid) == [cpu], "\(qos) worker \(tid)") }
        }
        #expect(pool.pinningFailure == nil)
        // The pinned workers still compute: every part once.
        let counts = UnsafeMutableBufferPointer<Int>.allocate(capacity: 16)
        defer { counts.deallocate() }
        counts.initialize(repeating: 0)
        pool.parallelFor(16, qos: .userInitiated) { counts[$0] += 1 }
        #expect(counts.allSatisfy { $0 == 1 })
    }
    #endif
}
