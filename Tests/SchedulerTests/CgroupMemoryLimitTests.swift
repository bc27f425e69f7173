import Foundation
import Testing
@testable import Ember
import EmberTestSupport

/// The cgroup memory limit is read as the kernel applies it, and only ever lowers the default budget.
struct CgroupMemoryLimitTests {
    @Test func cgroupV2LimitOfTheGroupAndItsAncestors() throws {
        let tree = try FakeFileTree(name: "cgroup")
        try tree.write("proc/self/cgroup", "0::/user.slice/app.service\n")
        try tree.write("sys/fs/cgroup/user.slice/app.service/memory.max", "max\n")
        try tree.write("sys/fs/cgroup/user.slice/memory.max", "2147483648\n")
        #expect(MemoryLimit.cgroupLimit(root: tree.root) == 2_147_483_648)
        try tree.write("sys/fs/cgroup/user.slice/app.service/memory.max", "1073741824\n")
        #expect(MemoryLimit.cgroupLimit(root: tree.root) == 1_073_741_824)
    }

    @Test func cgroupV1MemoryControllerAmongOthers() throws {
        let tree = try FakeFileTree(name: "cgroup")
        try tree.write("proc/self/cgroup", """
            12:pids:/docker/abc
            4:cpuacct,memory:/docker/abc
            1:name=systemd:/docker/abc
            0::/
            """)
        try tree.write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
        try tree.write("sys/fs/cgroup/memory/docker/memory.limit_in_bytes", "9223372036854771712\n")
        try tree.write("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "536870912\n")
        #expect(MemoryLimit.cgroupLimit(root: tree.root) == 536_870_912)
    }

    @Test func aContainerThatHidesItsPathUsesTheMountsLimit() throws {
        let tree = try FakeFileTree(name: "cgroup")
        // Inside a cgroup namespace the path names the host's folder, which the container does not see.
        try tree.write("proc/self/cgroup", "0::/kubepods/pod42/container7\n")
        try tree.write("sys/fs/cgroup/memory.max", "805306368\n")
        #expect(MemoryLimit.cgroupLimit(root: tree.root) == 805_306_368)
    }

    @Test func noLimitMalformedOrMissingFilesAreNoLimit() throws {
        let tree = try FakeFileTree(name: "cgroup")
        #expect(MemoryLimit.cgroupLimit(root: tree.root) == nil)  // no /proc/self/cgroup at all
        try tree.write("proc/self/cgroup", "0::/a\n")
        #expect(MemoryLimit.cgroupLimit(root: tree.root) == nil)  // no memory.max anywhere
        for garbage in ["max", "", "-5", "0", "12abc", "1e9", "99999999999999999999999", String(repeating: "7", count: 5000)] {
            try tree.write("sys/fs/cgroup/a/memory.max", garbage)
            #expect(MemoryLimit.cgroupLimit(root: tree.root) == nil, "memory.max \(garbage.prefix(20)) is no limit")
        }
        try tree.write("proc/self/cgroup", "garbage line\n:\n0:\n")
        #expect(MemoryLimit.cgroupLimit(root: tree.root) == nil)
    }

    @Test func theLowestOfV1AndV2Wins() throws {
        let tree = try FakeFileTree(name: "cgroup")
        try tree.write("proc/self/cgroup", "5:memory:/job\n0::/job\n")
        try tree.write("sys/fs/cgroup/memory/job/memory.limit_in_bytes", "3000000000")
        try tree.write("sys/fs/cgroup/unified/job/memory.max", "2000000000")
        #expect(MemoryLimit.cgroupLimit(root: tree.root) == 2_000_000_000)
    }

    @Test func theDefaultBudgetIsAQuarterOfTheMachineOrHalfALowerCgroupLimit() {
        let gib = 1 << 30
        #expect(MemoryLimit(physicalBytes: 24 * gib, cgroupBytes: nil).defaultBudget == 6 * gib)
        #expect(MemoryLimit(physicalBytes: 24 * gib, cgroupBytes: 2 * gib).defaultBudget == gib)
        #expect(MemoryLimit(physicalBytes: 24 * gib, cgroupBytes: 64 * gib).defaultBudget == 6 * gib)
        #expect(MemoryLimit(physicalBytes: 24 * gib, cgroupBytes: 2 * gib).bytes == 2 * gib)
    }

    @Test func thisProcessesLimitIsReadable() {
        // Whatever this machine's cgroup says, the budget never exceeds a quarter of its memory.
        let limit = MemoryLimit.current()
        #expect(limit.physicalBytes > 0)
        #expect(limit.defaultBudget <= limit.physicalBytes / 4)
        if let cgroup = limit.cgroupBytes { #expect(limit.defaultBudget <= cgroup / 2) }
    }
}
