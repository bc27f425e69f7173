import Foundation
import _CEmberThreads

/// A mutual-exclusion lock that avoids priority inversion on Linux.
///
/// Linux's `PTHREAD_PRIO_INHERIT` only lifts *real-time* holders (the
/// kernel's rt-mutex sees every normal thread as one priority, whatever its
/// nice value), so this lock does what Apple's rule asks for itself: it
/// records its holder's thread, and a waiter of higher QoS raises the
/// holder's OS priority to its own class until the holder unlocks, when the
/// holder's previous priority is restored. Underneath is still a
/// `PTHREAD_PRIO_INHERIT` mutex, so real-time users get kernel inheritance too.
///
/// Promotion needs the right to raise priorities (`QoSMapping.canRaise`);
/// without it the lock still excludes, but cannot promote.
public final class PromotingLock: @unchecked Sendable {
    private let mutex: OpaquePointer
    private let state = NSLock()
    private var holder: Int32 = 0
    private var holderQoS: QoSClass = .unspecified
    private var priorityBeforePromotion: ThreadPriority?
    private var promotedTo: QoSClass?
    private var waiting: [QoSClass: Int] = [:]
    private var promotionCount = 0

    /// The QoS-to-priority table used to promote a holder.
    public let mapping: QoSMapping
    /// Whether waiters promote the holder (off only to measure what promotion buys).
    public let promotes: Bool

    /// An unlocked lock; promotion uses `mapping` (this process's table by default) and is on unless `promotes` is false.
    public init(mapping: QoSMapping = .current, promotes: Bool = true) {
        mutex = et_mutex_create()
        self.mapping = mapping
        self.promotes = promotes
    }

    deinit { et_mutex_destroy(mutex) }

    /// Times a holder was promoted since the lock was made.
    public var promotions: Int { state.withLock { promotionCount } }

    /// Acquires the lock for the calling thread, whose class is ``QoSClass/current``.
    public func lock() {
        let me = currentThreadID, myQoS = QoSClass.current.resolved
        if !et_mutex_trylock(mutex) {
            state.withLock {
                waiting[myQoS, default: 0] += 1
                promoteHolderIfNeeded()
            }
            et_mutex_lock(mutex)
            state.withLock { waiting[myQoS, default: 1] -= 1 }
        }
        state.withLock {
            holder = me
            holderQoS = myQoS
            promoteHolderIfNeeded() // higher-QoS threads may already be waiting behind us
        }
    }

    /// Releases the lock, restoring the holder's priority if it was promoted.
    public func unlock() {
        state.withLock {
            if promotedTo != nil, let prior = priorityBeforePromotion {
                _ = prior.apply(toThread: holder)
            }
            promotedTo = nil
            priorityBeforePromotion = nil
            holder = 0
        }
        et_mutex_unlock(mutex)
    }

    /// Runs `body` holding the lock and returns its result; the lock is released even if `body` throws.
    public func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Raises the holder to the highest waiting class above its own (state lock held).
    private func promoteHolderIfNeeded() {
        guard promotes, holder != 0,
              let top = waiting.filter({ $0.value > 0 }).keys.max(),
              top > (promotedTo ?? holderQoS) else { return }
        let before = priorityBeforePromotion ?? ThreadPriority.of(thread: holder)
        if mapping.apply(top, toThread: holder) {
            priorityBeforePromotion = before
            promotedTo = top
            promotionCount += 1
        }
    }
}
