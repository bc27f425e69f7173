import Foundation

/// SHA-256 of files, read in pieces, through ``SHA256Hasher``.
public enum FileChecksum {
    /// The lower-case hex SHA-256 of the file at `url`, read 1 MiB at a time.
    public static func sha256(ofFileAt url: URL) throws -> String {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var hasher = SHA256Hasher()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { hasher.update(data: chunk) }
        return hex(hasher.finalize())
    }

    /// The lower-case hex SHA-256 of `bytes`.
    public static func sha256<Bytes: DataProtocol>(of bytes: Bytes) -> String { hex(SHA256Hasher.hash(data: bytes)) }

    /// A digest as lower-case hex.
    public static func hex(_ digest: [UInt8]) -> String { digest.map { String(format: "%02x", $0) }.joined() }
}
