import Ember
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One client of the worker: lines in from `input`, lines out to `output`
/// (the same socket, or stdin and stdout). Writes go through a serial queue,
/// so a slow client never blocks inference; a failed write marks the client
/// gone and cancels its requests.
final class WorkerConnection: @unchecked Sendable {
    let input: Int32
    let output: Int32
    let isSocket: Bool
    let name: String
    private let writes: DispatchQueue
    private let lock = NSLock()
    private let idle = NSCondition()
    private var running: [String: Task<Void, Never>] = [:]
    private var gone = false
    private var onlyWhileCharging: Bool
    private var lastStatus: String?
    /// Bytes queued for writing at most; beyond it the client is dropped as too slow.
    let maxQueuedBytes: Int
    private var queuedBytes = 0

    init(input: Int32, output: Int32, isSocket: Bool, name: String, maxQueuedBytes: Int = .max, runOnlyWhileCharging: Bool) {
        (self.input, self.output, self.isSocket, self.name) = (input, output, isSocket, name)
        self.maxQueuedBytes = maxQueuedBytes
        onlyWhileCharging = runOnlyWhileCharging
        writes = DispatchQueue(label: "ember.worker.\(name).writes")
        if isSocket {
            // A client that stops reading for 10 s is dropped rather than holding a writer forever.
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(output, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
    }

    // MARK: Settings

    var runOnlyWhileCharging: Bool {
        get { lock.withLock { onlyWhileCharging } }
        set { lock.withLock { onlyWhileCharging = newValue } }
    }

    /// Whether `status` differs from the last status this client was sent (and records it).
    func statusChanged(_ status: String) -> Bool {
        lock.withLock {
            guard status != lastStatus else { return false }
            lastStatus = status
            return true
        }
    }

    // MARK: Requests

    /// Records a running request; false if one with this id already runs.
    func start(_ id: String, _ task: () -> Task<Void, Never>) -> Bool {
        lock.withLock {
            guard running[id] == nil, !gone else { return false }
            running[id] = task()
            return true
        }
    }

    func finished(_ id: String) {
        lock.withLock { _ = running.removeValue(forKey: id) }
        idle.withLock { idle.broadcast() }
    }

    /// Cancels one request; false if no request with that id runs.
    func cancel(_ id: String) -> Bool {
        guard let task = lock.withLock({ running[id] }) else { return false }
        task.cancel()
        return true
    }

    /// Cancels every running request of this client; how many there were.
    @discardableResult
    func cancelAll() -> Int {
        let tasks = lock.withLock { Array(running.values) }
        tasks.forEach { $0.cancel() }
        return tasks.count
    }

    var runningCount: Int { lock.withLock { running.count } }

    /// Blocks until no request of this client runs.
    func waitUntilIdle() {
        idle.withLock {
            while runningCount > 0 { idle.wait() } // finished(_:) broadcasts after each request ends
        }
    }

    // MARK: Writing

    var isGone: Bool { lock.withLock { gone } }

    /// Queues `line` (plus a newline) for the client. A client whose unread answers pass ``maxQueuedBytes`` is
    /// too slow: it is disconnected and its requests cancelled, so its backlog never grows without bound.
    func send(_ line: String) {
        let size = line.utf8.count + 1
        let overflow = lock.withLock { () -> Bool in
            guard !gone else { return false }
            queuedBytes += size
            if queuedBytes > maxQueuedBytes { slow = true }
            return slow
        }
        if overflow {
            markGone()
            if isSocket { shutdown(input, Int32(SHUT_RDWR)) } // ends its reader too
            return
        }
        writes.async { [self] in
            defer { lock.withLock { queuedBytes -= size } }
            guard !isGone else { return }
            var bytes = Array(line.utf8)
            bytes.append(0x0A)
            if !writeAll(bytes) { markGone() }
        }
    }

    private var slow = false
    /// Whether the client was dropped for reading too slowly.
    var droppedAsSlow: Bool { lock.withLock { slow } }

    /// Runs `body` after every line queued so far has been written.
    func afterWrites(_ body: @escaping @Sendable () -> Void) { writes.async(execute: body) }

    /// The client cannot be written to: its requests are cancelled.
    func markGone() {
        let first = lock.withLock { () -> Bool in
            defer { gone = true }
            return !gone
        }
        if first { cancelAll() }
    }

    private func writeAll(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let pointer = buffer.baseAddress! + offset
                let written = isSocket ? socketSend(output, pointer, buffer.count - offset)
                                       : write(output, pointer, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += written
            }
            return true
        }
    }

    // MARK: Reading

    /// What the reader found.
    enum Line {
        case line(Data)
        /// A line longer than the limit; its bytes were skipped up to the next newline.
        case tooLong(Int)
    }

    /// Reads lines until end of input, handing each to `handle`; returns how
    /// the input ended.
    func readLines(maxLineBytes: Int, _ handle: (Line) -> Void) -> Ending {
        var buffer: [UInt8] = []
        var discarding = false
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return .failed(String(cString: strerror(errno)))
            }
            if count == 0 { return hungUp() ? .hungUp : .endOfInput }
            var start = 0
            for index in 0..<count where chunk[index] == 0x0A {
                if discarding {
                    discarding = false
                } else {
                    buffer.append(contentsOf: chunk[start..<index])
                    if buffer.last == 0x0D { buffer.removeLast() }
                    if !buffer.isEmpty { handle(.line(Data(buffer))) }
                }
                buffer.removeAll(keepingCapacity: true)
                start = index + 1
            }
            if !discarding { buffer.append(contentsOf: chunk[start..<count]) }
            if buffer.count > maxLineBytes {
                handle(.tooLong(maxLineBytes))
                buffer.removeAll()
                discarding = true
            }
        }
    }

    /// How a client's input ended.
    enum Ending: Equatable {
        /// The client closed its side for writing but still reads (or stdin ended).
        case endOfInput
        /// The client went away entirely.
        case hungUp
        case failed(String)
    }

    /// After end of input: whether the peer is gone too (not just done writing).
    private func hungUp() -> Bool {
        guard isSocket else { return false }
        var poller = pollfd(fd: output, events: Int16(POLLOUT), revents: 0)
        guard poll(&poller, 1, 0) >= 0 else { return true }
        return poller.revents & Int16(POLLHUP | POLLERR) != 0
    }
}

/// `send(2)` without SIGPIPE where the platform has the flag.
private func socketSend(_ socket: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
    Glibc.send(socket, bytes, count, Int32(MSG_NOSIGNAL))
    #else
    Darwin.send(socket, bytes, count, 0)
    #endif
}
