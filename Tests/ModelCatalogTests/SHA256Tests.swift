import Foundation
import Testing
@testable import Ember

/// SHA-256 against the FIPS 180-4 example vectors, fed whole and in odd pieces.
@Suite("SHA-256")
struct SHA256Tests {
    static let vectors: [(message: String, digest: String)] = [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
        ("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"),
    ]

    @Test(arguments: vectors)
    func knownVector(message: String, digest: String) {
        #expect(SHA256.hexDigest(of: Array(message.utf8)) == digest)
    }

    @Test func oneMillionAs() {
        var hasher = SHA256()
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        for _ in 0..<1000 { hasher.update(chunk) }
        #expect(SHA256.hex(hasher.finalize()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func piecewiseEqualsWhole() {
        var generator = SplitMix64(seed: 3)
        let message = (0..<1_000).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        let whole = SHA256.hexDigest(of: message)
        for pieceSize in [1, 7, 63, 64, 65, 333] {
            var hasher = SHA256()
            var start = 0
            while start < message.count {
                hasher.update(message[start..<min(start + pieceSize, message.count)])
                start += pieceSize
            }
            #expect(SHA256.hex(hasher.finalize()) == whole, "pieces of \(pieceSize)")
        }
    }

    @Test func fileDigestMatchesInMemoryDigest() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("ember-sha-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: url) }
        let data = Data((0..<(3 << 20) + 17).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try data.write(to: url)
        #expect(try SHA256.hexDigest(ofFileAt: url) == SHA256.hexDigest(of: data))
    }
}
