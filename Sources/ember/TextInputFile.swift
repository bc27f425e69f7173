import Ember
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A text a command reads whole (`ember perplexity -f`): a file on disk or a pipe (`-f <(…)`), up to
/// ``TextInputFile/maximumBytes``. Anything else is refused by what it is before a byte is read — a device such as
/// `/dev/zero` would otherwise be read until memory ran out, a directory or a missing file said only "cannot read".
enum TextInputFile {
    /// The most bytes read: wikitext-2's test set, the usual perplexity text, is 1.3 MB.
    static let maximumBytes = 256 << 20

    /// The bytes of `path`, or an error naming the path, what it is and what is expected.
    static func contents(of path: String, option: String) throws -> Data {
        let expected = "expected a text file or a pipe"
        var info = stat()
        guard stat(path, &info) == 0 else {
            let reason = errno == ENOENT ? "no such file" : String(cString: strerror(errno))
            throw TextInputError(message: "\(option) \(path): cannot read: \(reason); \(expected)")
        }
        if info.st_mode & S_IFMT != S_IFIFO, let kind = MappedFile.notRegular(info.st_mode) { // a pipe is read whole
            throw TextInputError(message: "\(option) \(path): \(kind), not a text file; \(expected)")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw TextInputError(message: "\(option) \(path): cannot open: \(String(cString: strerror(errno))); \(expected)")
        }
        defer { try? handle.close() }
        var data = Data()
        while true {
            let chunk = try handle.read(upToCount: 1 << 20) ?? Data()
            if chunk.isEmpty { return data }
            data.append(chunk)
            if data.count > maximumBytes {
                throw TextInputError(message: "\(option) \(path): more than \(maximumBytes >> 20) MB of text; "
                                     + "give a shorter text (perplexity needs a few MB at most)")
            }
        }
    }
}

/// A refused text input, its message naming the file.
struct TextInputError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
