import Foundation
import Testing
import EmberCatalog
import EmberCore
import EmberTestSupport

/// The catalog's checksums (its own SHA-256) against the FIPS 180-4 example vectors, coreutils' `sha256sum` at every
/// padding boundary and fed in uneven pieces, and files read in pieces.
@Suite("SHA-256 of files")
struct SHA256Tests {
    static let vectors: [(message: String, digest: String)] = [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ]

    @Test(arguments: vectors)
    func knownVector(message: String, digest: String) {
        #expect(FileChecksum.sha256(of: Array(message.utf8)) == digest)
    }

    /// A file larger than one read (3 MiB + 17 bytes, read 1 MiB at a time) hashes as its bytes do.
    @Test func fileDigestMatchesInMemoryDigest() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("ember-sha-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: url) }
        let data = Data((0..<(3 << 20) + 17).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try data.write(to: url)
        #expect(try FileChecksum.sha256(ofFileAt: url) == FileChecksum.sha256(of: data))
        let million = Data(repeating: UInt8(ascii: "a"), count: 1_000_000)
        try million.write(to: url)
        #expect(try FileChecksum.sha256(ofFileAt: url) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// Every length from 0 to 200 bytes (each way the padding can fall: 55, 56, 63, 64 and 119, 120 bytes past a
    /// block) and one of 100,003, hashed whole and fed in uneven pieces, against `sha256sum`.
    @Test func matchesSha256sumAtEveryPaddingBoundary() async throws {
        var generator = SplitMix64(seed: 256)
        let lengths = Array(0...200) + [100_003]
        let messages = lengths.map { length in (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) } }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ember-sha-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for (index, message) in messages.enumerated() {
            try Data(message).write(to: folder.appendingPathComponent("m\(index)"))
        }
        let reference = try await ExternalProcess.run("sha256sum", messages.indices.map { "m\($0)" }, workingDirectory: folder, timeout: 60)
        try #require(reference.status == 0, "\(reference.standardError)")
        let expected = reference.standardOutput.split(separator: "\n").map { String($0.prefix(64)) }
        try #require(expected.count == messages.count)
        for (index, message) in messages.enumerated() {
            #expect(FileChecksum.sha256(of: message) == expected[index], "\(message.count) bytes")
            var pieces = SHA256Hasher()
            var offset = 0, step = 1
            while offset < message.count {
                let end = min(message.count, offset + step)
                pieces.update(data: message[offset..<end])
                offset = end
                step = step % 97 + 13
            }
            #expect(FileChecksum.hex(pieces.finalize()) == expected[index], "\(message.count) bytes in pieces")
        }
    }
}
