import Foundation

/// Polls `condition` every millisecond or so for up to `seconds`: tests wait for
/// the event they test instead of racing the clock.
public func eventually(seconds: Double = 10, _ condition: () async -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return await condition()
}
