import Foundation

/// Where the package's built products are, and a way to run other programs
/// (a C compiler, the `ember` binary, Python) from tests with a time limit.
public enum ExternalProcess {
    /// The repository's root folder.
    public static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The folder of the running test binary: `ember` and `libEmberC.so` are built next to it.
    public static var productsDirectory: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    }

    /// What a finished program did.
    public struct Outcome: Sendable {
        public var status: Int32
        public var standardOutput: String
        public var standardError: String
        public var timedOut: Bool
    }

    /// Runs `executable` with `arguments` (standard input from `input`, in `workingDirectory` if given) and
    /// waits at most `timeout` seconds, killing it after that. Waits without
    /// blocking a thread of Swift's cooperative pool, so async tests running
    /// beside it keep their threads.
    public static func run(_ executable: String, _ arguments: [String], input: Data? = nil,
                           environment: [String: String]? = nil, workingDirectory: URL? = nil,
                           timeout: Double = 300) async throws -> Outcome {
        let process = Process()
        if let workingDirectory { process.currentDirectoryURL = workingDirectory }
        process.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : "/usr/bin/env")
        process.arguments = executable.hasPrefix("/") ? arguments : [executable] + arguments
        if let environment { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let (output, error) = (Pipe(), Pipe())
        process.standardOutput = output
        process.standardError = error
        let inputPipe = Pipe()
        process.standardInput = input == nil ? FileHandle.nullDevice : inputPipe
        let collected = Collected()
        let readers = DispatchGroup()
        for (pipe, isError) in [(output, false), (error, true)] {
            readers.enter()
            DispatchQueue.global().async {
                let data = pipe.fileHandleForReading.readDataToEndOfFile()
                collected.set(data, isError: isError)
                readers.leave()
            }
        }
        readers.enter() // left when the process ends
        process.terminationHandler = { _ in readers.leave() }
        try process.run()
        if let input {
            DispatchQueue.global().async {
                try? inputPipe.fileHandleForWriting.write(contentsOf: input)
                try? inputPipe.fileHandleForWriting.close()
            }
        }
        let timedOut = TimeoutFlag()
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
            if process.isRunning {
                timedOut.set()
                process.terminate()
            }
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            readers.notify(queue: .global()) { done.resume() }
        }
        return Outcome(status: process.terminationStatus, standardOutput: collected.text(isError: false),
                       standardError: collected.text(isError: true), timedOut: timedOut.isSet)
    }

    private final class TimeoutFlag: @unchecked Sendable {
        private let lock = NSLock()
        private var value = false
        func set() { lock.withLock { value = true } }
        var isSet: Bool { lock.withLock { value } }
    }

    private final class Collected: @unchecked Sendable {
        private let lock = NSLock()
        private var output = Data()
        private var error = Data()
        func set(_ data: Data, isError: Bool) { lock.withLock { if isError { error = data } else { output = data } } }
        func text(isError: Bool) -> String { lock.withLock { String(decoding: isError ? error : output, as: UTF8.self) } }
    }
}
