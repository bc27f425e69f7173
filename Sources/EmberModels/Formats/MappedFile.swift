import EmberCore
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A whole file mapped read-only into memory. Tensors borrow from it; it
/// stays mapped while any of them (or the model) holds a reference.
public final class MappedFile: @unchecked Sendable {
    /// The file's path as given.
    public let path: String
    /// The file's contents, read-only; empty for an empty file. Valid while this object lives.
    public let bytes: UnsafeRawBufferPointer

    /// Maps the whole file at `path` read-only; throws ``ModelFileError/unreadable(file:reason:)`` if it cannot be opened or
    /// mapped, or is not a regular file (a FIFO, a device, a socket, a directory: opened without waiting for a writer,
    /// and refused by what it is rather than read as an empty or endless file).
    public init(path: String) throws {
        self.path = path
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { throw ModelFileError.unreadable(file: path, reason: String(cString: strerror(errno))) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw ModelFileError.unreadable(file: path, reason: String(cString: strerror(errno)))
        }
        if let kind = Self.notRegular(status.st_mode) {
            throw ModelFileError.unreadable(file: path, reason: "\(kind), not a regular file; expected a model file on disk")
        }
        let size = Int(status.st_size)
        guard size > 0 else {
            bytes = UnsafeRawBufferPointer(start: nil, count: 0)
            return
        }
        guard let address = mmap(nil, size, PROT_READ, MAP_PRIVATE, descriptor, 0), address != MAP_FAILED else {
            throw ModelFileError.unreadable(file: path, reason: "mmap: " + String(cString: strerror(errno)))
        }
        bytes = UnsafeRawBufferPointer(start: address, count: size)
    }

    /// The bytes of the small file at `path` (a JSON configuration or tokenizer): read through the same checks as a
    /// mapping, so a FIFO, a device such as /dev/zero or a file over `limit` bytes is refused by name, never read
    /// until memory runs out.
    public static func contents(ofSmallFile path: String, limit: Int = 256 << 20) throws -> Data {
        let file = try MappedFile(path: path)
        guard file.bytes.count <= limit else {
            throw ModelFileError.unreadable(file: path, reason: "\(file.bytes.count) bytes; expected a configuration file of at most \(limit) bytes")
        }
        return Data(file.bytes)
    }

    /// What a file of mode `mode` (`stat`'s `st_mode`) is when it is not a regular file ("a directory", "a FIFO (named
    /// pipe)", "a character device", …), nil for a regular one: the words every refusal of a path by its kind uses.
    public static func notRegular(_ mode: mode_t) -> String? {
        switch mode & S_IFMT {
        case S_IFREG: nil
        case S_IFDIR: "a directory"
        case S_IFIFO: "a FIFO (named pipe)"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFSOCK: "a socket"
        default: "not a file (mode \(String(mode, radix: 8)))"
        }
    }

    deinit {
        if let base = bytes.baseAddress { munmap(UnsafeMutableRawPointer(mutating: base), bytes.count) }
    }
}
