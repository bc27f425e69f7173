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

    /// Maps the whole file at `path` read-only; throws ``ModelFileError/unreadable(file:reason:)`` if it cannot be opened or mapped.
    public init(path: String) throws {
        self.path = path
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw ModelFileError.unreadable(file: path, reason: String(cString: strerror(errno))) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw ModelFileError.unreadable(file: path, reason: String(cString: strerror(errno)))
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

    deinit {
        if let base = bytes.baseAddress { munmap(UnsafeMutableRawPointer(mutating: base), bytes.count) }
    }
}
