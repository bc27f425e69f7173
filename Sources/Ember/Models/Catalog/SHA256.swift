import Foundation

/// SHA-256 (FIPS 180-4), streaming: feed bytes with ``update(_:)``, read the
/// digest with ``finalize()``. Used to verify downloaded wheels and extracted
/// model files against the checksums pinned in the model manifest.
public struct SHA256: Sendable {
    private var state: State = (
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19
    )
    private var pending = [UInt8]()
    private var totalBytes: UInt64 = 0

    private static let roundConstants: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    /// An empty hasher, ready for ``update(_:)``.
    public init() {}

    /// Adds `bytes` to the message.
    public mutating func update<Bytes: DataProtocol>(_ bytes: Bytes) {
        totalBytes &+= UInt64(bytes.count)
        for region in bytes.regions {
            region.withUnsafeBytes { absorb($0) }
        }
    }

    private mutating func absorb(_ input: UnsafeRawBufferPointer) {
        var input = input[...]
        if !pending.isEmpty {
            let take = min(64 - pending.count, input.count)
            pending.append(contentsOf: input.prefix(take))
            input = input.dropFirst(take)
            guard pending.count == 64 else { return }
            pending.withUnsafeBytes { compress(block: $0) }
            pending.removeAll(keepingCapacity: true)
        }
        while input.count >= 64 {
            compress(block: UnsafeRawBufferPointer(rebasing: input.prefix(64)))
            input = input.dropFirst(64)
        }
        pending.append(contentsOf: input)
    }

    /// The 32-byte digest of everything added so far.
    public mutating func finalize() -> [UInt8] {
        let bitLength = totalBytes &* 8
        var tail: [UInt8] = [0x80]
        let afterMarker = (Int(totalBytes % 64) + 1) % 64
        tail += [UInt8](repeating: 0, count: (56 - afterMarker + 64) % 64)
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        tail.withUnsafeBytes { absorb($0) }
        let words = [state.0, state.1, state.2, state.3, state.4, state.5, state.6, state.7]
        return words.flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> (24 - 8 * UInt32($0))) } }
    }

    @inline(__always)
    private static func rotateRight(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }

    private mutating func compress(block: UnsafeRawBufferPointer) {
        state = withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            Self.compress(block: block, state: state, schedule: w)
        }
    }

    private typealias State = (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)

    private static func compress(block: UnsafeRawBufferPointer, state: State, schedule w: UnsafeMutableBufferPointer<UInt32>) -> State {
        for t in 0..<16 {
            w[t] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: 4 * t, as: UInt32.self))
        }
        for t in 16..<64 {
            let s0 = rotateRight(w[t - 15], 7) ^ rotateRight(w[t - 15], 18) ^ (w[t - 15] >> 3)
            let s1 = rotateRight(w[t - 2], 17) ^ rotateRight(w[t - 2], 19) ^ (w[t - 2] >> 10)
            w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
        }
        var (a, b, c, d, e, f, g, h) = state
        for t in 0..<64 {
            let s1 = rotateRight(e, 6) ^ rotateRight(e, 11) ^ rotateRight(e, 25)
            let choose = (e & f) ^ (~e & g)
            let t1 = h &+ s1 &+ choose &+ roundConstants[t] &+ w[t]
            let s0 = rotateRight(a, 2) ^ rotateRight(a, 13) ^ rotateRight(a, 22)
            let majority = (a & b) ^ (a & c) ^ (b & c)
            let t2 = s0 &+ majority
            (h, g, f, e, d, c, b, a) = (g, f, e, d &+ t1, c, b, a, t1 &+ t2)
        }
        return (
            state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d,
            state.4 &+ e, state.5 &+ f, state.6 &+ g, state.7 &+ h
        )
    }

    /// The digest of `bytes`, as lower-case hex.
    public static func hexDigest<Bytes: DataProtocol>(of bytes: Bytes) -> String {
        var hasher = SHA256()
        hasher.update(bytes)
        return hex(hasher.finalize())
    }

    /// The digest of the file at `url`, read in 1 MiB chunks, as lower-case hex.
    public static func hexDigest(ofFileAt url: URL) throws -> String {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            hasher.update(chunk)
        }
        return hex(hasher.finalize())
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
