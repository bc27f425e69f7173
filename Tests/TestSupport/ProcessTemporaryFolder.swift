import Foundation
import Synchronization

/// Folders under the temporary directory that belong to this test process — its pid in the name, so concurrent runs
/// keep apart — and are removed when it exits.
public enum ProcessTemporaryFolder {
    private static let folders = Mutex<[URL]>([])

    /// `<temporary directory>/<prefix>-<pid>`, removed at exit (made by whoever writes into it, not here).
    public static func named(_ prefix: String) -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(getpid())")
        folders.withLock { registered in
            if registered.isEmpty { atexit { ProcessTemporaryFolder.removeAll() } }
            if !registered.contains(folder) { registered.append(folder) }
        }
        return folder
    }

    private static func removeAll() {
        for folder in folders.withLock({ $0 }) { try? FileManager.default.removeItem(at: folder) }
    }
}
