import _CEmberAPI
import Ember
import Foundation

/// Turns Swift errors into the C API's status codes and keeps each thread's
/// last error message for `ember_last_error()`.
enum CStatus {
    /// The status code and message for `error`.
    static func from(_ error: Error) -> (ember_status_t, String) {
        let message = String(describing: error)
        switch error {
        case is CancellationError:
            return (EMBER_ERROR_CANCELLED, "the request was cancelled")
        case let error as SchedulerError:
            return (EMBER_ERROR_DROPPED, error.description)
        case let error as ModelCatalogError:
            if case .unknownModel = error { return (EMBER_ERROR_MODEL_NOT_FOUND, message) }
            if case .unreadable = error { return (EMBER_ERROR_MODEL_NOT_FOUND, message) }
            return (EMBER_ERROR_MODEL_FILE, message)
        case is ModelFileError, is TensorError:
            return (EMBER_ERROR_MODEL_FILE, message)
        case is KernelError:
            return (EMBER_ERROR_INVALID_ARGUMENT, message)
        default:
            return (EMBER_ERROR_INTERNAL, message)
        }
    }

    /// Records `message` as this thread's last error and returns `status`.
    static func fail(_ status: ember_status_t, _ message: String) -> ember_status_t {
        LastError.set(message)
        return status
    }

    /// Records `error` as this thread's last error and returns its status.
    static func fail(_ error: Error) -> ember_status_t {
        let (status, message) = from(error)
        return fail(status, message)
    }

    /// A status that refuses a call, its message already recorded (so it can travel in a `Result`).
    struct Refusal: Error {
        let status: ember_status_t
        init(_ status: ember_status_t) { self.status = status }
    }

    /// EMBER_ERROR_INVALID_ARGUMENT naming the argument, what was found and what was expected.
    static func invalid(_ argument: String, found: String, expected: String) -> ember_status_t {
        fail(EMBER_ERROR_INVALID_ARGUMENT, "\(argument): found \(found), expected \(expected)")
    }
}

/// The message of each thread's last failing call, as a C string that stays
/// valid until that thread's next failure.
enum LastError {
    private final class Message {
        let pointer: UnsafeMutablePointer<CChar>
        init(_ text: String) { pointer = strdup(text) }
        deinit { free(pointer) }
    }

    private static let key = "ember.lastError"
    nonisolated(unsafe) private static let empty: UnsafeMutablePointer<CChar> = strdup("")

    static func set(_ text: String) { Thread.current.threadDictionary[key] = Message(text) }

    static var pointer: UnsafePointer<CChar> {
        UnsafePointer((Thread.current.threadDictionary[key] as? Message)?.pointer ?? empty)
    }
}

/// Runs `body` (async) to completion from a C caller's thread.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) -> Result<T, Error> {
    let done = DispatchSemaphore(value: 0)
    let box = ResultBox<T>()
    Task {
        do { box.value = .success(try await body()) } catch { box.value = .failure(error) }
        done.signal()
    }
    done.wait()
    return box.value!
}

private final class ResultBox<T>: @unchecked Sendable {
    var value: Result<T, Error>?
}
