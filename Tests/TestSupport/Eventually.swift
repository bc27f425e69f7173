import Foundation

/// Polls `condition` every millisecond or so for up to `seconds`: tests wait for
/// the event they test instead of racing the clock.
///
/// The default is long on purpose. In a full `swift test` run on 2 cores the
/// model tests keep both cooperative threads busy at default priority, and a
/// utility- or background-class task (a standard or background request) has
/// waited more than 10 s to be scheduled at all. A passing check returns as soon
/// as its condition holds, so only a failing run pays the wait.
public func eventually(seconds: Double = 120, _ condition: () async -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return await condition()
}
