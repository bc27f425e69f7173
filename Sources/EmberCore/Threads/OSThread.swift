import Foundation
import _CEmberThreads

/// Starting an OS thread in a way that can fail visibly. Foundation's
/// `Thread.start()` has no failure path: when the system cannot create a
/// thread (out of memory under `ulimit -v`, the thread limit reached) the body
/// never runs and whoever waits for it waits forever. Every thread Ember
/// starts goes through here, and each caller decides what a failure means.
public enum OSThread {
    /// Why a thread could not be started.
    public struct StartError: Error, CustomStringConvertible, Equatable {
        /// The thread's name.
        public var name: String
        /// The errno `pthread_create` gave.
        public var code: Int32

        /// What failed, why, and what to try.
        public var description: String {
            "cannot start thread \(name): \(String(cString: strerror(code))) (errno \(code)); the process is out of memory or "
                + "threads — free some, raise `ulimit -v` / `ulimit -u`, or use fewer threads"
        }
    }

    /// Runs `body` on a new detached thread named `name`, with a stack of `stackBytes` (0: the system's default);
    /// throws ``StartError`` when the thread cannot be created (then `body` never runs).
    public static func start(name: String, stackBytes: Int = 0, _ body: @escaping () -> Void) throws {
        final class Box { let body: () -> Void; init(_ body: @escaping () -> Void) { self.body = body } }
        let box = Unmanaged.passRetained(Box(body))
        let code = et_thread_start({ context in
            let box = Unmanaged<Box>.fromOpaque(context!)
            box.takeUnretainedValue().body()
            box.release()
        }, box.toOpaque(), max(0, stackBytes), name)
        guard code == 0 else {
            box.release()
            throw StartError(name: name, code: code)
        }
    }
}
