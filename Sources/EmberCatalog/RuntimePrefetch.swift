import Ember
import EmberModels
import Foundation

/// Fetching models as a job of the runtime's scheduler, like any other request: batched (every file of every model
/// asked for in one run), retried with backoff, resumable (files already verified are kept and checked again, never
/// fetched again), and — when discretionary — deferred until the device is on external power, then run anyway when
/// the tolerance window ends (what energy guides ask of apps' non-essential transfers).
extension Runtime {
    /// What a prefetch did: each model's files and whether each was fetched or already there (both verified).
    public typealias PrefetchResult = [(model: String, files: [(path: String, outcome: ModelFetcher.FileOutcome)])]

    /// Fetches `names` with `fetcher` as a background request. `discretionary`: it waits for external power, at most
    /// `within` seconds (then runs regardless); `onWaiting` hears why it waits; `attempts` tries with a backoff of
    /// 1 s, 2 s, 4 s … between them for failed downloads (a checksum mismatch is not retried: it deletes the bad file
    /// and throws).
    public func prefetch(_ names: [String], fetcher: ModelFetcher, discretionary: Bool = false, within: TimeInterval = 3600,
                         attempts: Int = 3, onWaiting: (@Sendable (String) -> Void)? = nil) async throws -> PrefetchResult {
        let request = { (requiresPower: Bool, deadline: Date?) in
            InferenceRequest(requirements: RequestRequirements(tier: .background, requiresExternalPower: requiresPower), deadline: deadline) { _, _ in
                try await QoSThread.value(qos: .utility) { try Self.fetch(names, with: fetcher, attempts: attempts) } as PrefetchBox
            }
        }
        let result: InferenceResult
        if discretionary {
            do {
                result = try await scheduler.submit(request(true, Date().addingTimeInterval(max(0, within))), tier: .background,
                                                    onPiece: nil, onDeferred: onWaiting)
            } catch SchedulerError.dropped(reason: "deadline passed") {
                onWaiting?("no external power within \(Int(within)) s: fetching now")
                result = try await scheduler.submit(request(false, nil), tier: .critical, onPiece: nil, onDeferred: onWaiting)
            }
        } else {
            result = try await scheduler.submit(request(false, nil), tier: .critical, onPiece: nil, onDeferred: onWaiting)
        }
        guard let box = result.output as? PrefetchBox else {
            throw ModelCatalogError.unreadable(file: "prefetch", reason: "the scheduler returned \(type(of: result.output))")
        }
        return box.value
    }

    /// Every file of every model in `names`, each model retried on download failures.
    static func fetch(_ names: [String], with fetcher: ModelFetcher, attempts: Int) throws -> PrefetchBox {
        var done: PrefetchResult = []
        for name in names {
            var attempt = 1
            while true {
                do {
                    done.append((name, try fetcher.fetch(name)))
                    break
                } catch let error as ModelCatalogError {
                    guard case .downloadFailed = error, attempt < max(1, attempts) else { throw error }
                    fetcher.log("\(name): \(error); retrying in \(1 << (attempt - 1)) s (attempt \(attempt + 1) of \(attempts))")
                    Thread.sleep(forTimeInterval: Double(1 << (attempt - 1)))
                    attempt += 1
                }
            }
        }
        return PrefetchBox(value: done)
    }
}

/// A prefetch's result as the scheduler carries it.
struct PrefetchBox: @unchecked Sendable {
    let value: Runtime.PrefetchResult
}
