import Crypto
import Foundation

/// SHA-256 of files, read in pieces, through swift-crypto's `SHA256`.
public enum FileChecksum {
    /// The lower-case hex SHA-256 of the file at `url`, read 1 MiB at a time.
    public static func sha256(ofFileAt url: URL) throws -> String {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { hasher.update(data: chunk) }
        return hex(hasher.finalize())
    }

    /// The lower-case hex SHA-256 of `bytes`.
    public static func sha256<Bytes: DataProtocol>(of bytes: Bytes) -> String { hex(SHA256.hash(data: bytes)) }

    /// A digest as lower-case hex.
    public static func hex(_ digest: SHA256.Digest) -> String { digest.map { String(format: "%02x", $0) }.joined() }
}
