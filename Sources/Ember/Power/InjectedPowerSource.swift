import EmberCore
import EmberModels
import Foundation

/// A power state the host application sets itself — for platforms where
/// Ember cannot read the battery, for hosts that already track it, and for
/// demos. Every ``set(_:)`` reaches every subscriber of ``changes()``.
public final class InjectedPowerSource: PowerSource, @unchecked Sendable {
    private let observed: ObservedPowerState

    /// A source starting at `state` (default ``PowerState/mains``).
    public init(_ state: PowerState = .mains) { observed = ObservedPowerState(state) }

    /// The state last set.
    public func current() -> PowerState { observed.value }

    /// Every later ``set(_:)`` whose conditions differ from the state before it; the stream never finishes on its own.
    public func changes() -> AsyncStream<PowerState> { observed.stream() }

    /// Makes `newState` current and announces it (equal conditions are not repeated).
    public func set(_ newState: PowerState) { observed.publish(newState) }
}
