import _CEmberThreads

/// Work a region's threads deal out among themselves at several *sites* (a decode step's matmuls), with stealing:
/// at each site a thread starts on its even share and claims it front to back in a few pieces, and a thread that has
/// run out takes half of what is left of another's, from its end. On a shared host one core is often slower for a
/// while (its sibling busy): an even split then left the other core waiting at the next barrier — 11–16 % of a
/// SmolLM2 decode's samples on a 2-core Zen 3 were barrier waits.
package final class WorkRanges: @unchecked Sendable {
    private let handle: OpaquePointer
    /// Sites and threads the ranges were made for (at most `threads` share a site).
    package let sites: Int
    package let threads: Int

    /// Ranges for `sites` sites of `threads` threads; nil when out of memory or either count is not positive.
    package init?(sites: Int, threads: Int) {
        guard sites > 0, threads > 0, sites <= Int(Int32.max), threads <= Int(Int32.max),
              let handle = et_work_ranges_create(Int32(sites), Int32(threads)) else { return nil }
        self.handle = handle
        self.sites = sites
        self.threads = threads
    }

    deinit { et_work_ranges_destroy(handle) }

    /// Deals `units` at `site` afresh among threads 0 ..< `sharing` (at most ``threads``; only they may claim there),
    /// before any of them claims.
    package func reset(site: Int, units: Int, sharing: Int) {
        guard (0..<sites).contains(site) else { return }
        et_work_ranges_reset(handle, Int32(site), Int64(units), Int32(clamping: sharing)) // both clamped there
    }

    /// The next piece of `thread` at `site`, in units; nil once the site's work is all claimed (or no such site or
    /// thread).
    package func claim(site: Int, thread: Int) -> Range<Int>? {
        guard (0..<sites).contains(site), (0..<threads).contains(thread) else { return nil }
        var begin: Int64 = 0, end: Int64 = 0
        guard et_work_ranges_claim(handle, Int32(site), Int32(thread), &begin, &end) else { return nil }
        return Int(begin)..<Int(end)
    }
}
