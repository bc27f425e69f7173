import Foundation

/// A temporary folder standing in for part of the real file system (`/sys`, `/proc/self/cgroup`): a fake for tests
/// only, so that readers of system files can be checked on every layout on any machine. Removed when released.
public final class FakeFileTree {
    /// The folder that plays `/`.
    public let root: URL

    /// A new empty tree; `name` goes into the folder's name for whoever finds it left behind.
    public init(name: String) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("ember-fake-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    /// Writes `text` to `path` (relative to ``root``), making its folders.
    public func write(_ path: String, _ text: String) throws {
        let url = root.appendingPathComponent(path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url)
    }

    deinit { try? FileManager.default.removeItem(at: root) }
}
