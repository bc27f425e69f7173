import Foundation

/// SHA-256 (FIPS 180-4, section 6.2) of bytes fed in pieces: what the catalog checks downloaded wheels and
/// extracted model files against.
///
/// Written here rather than taken from swift-crypto: the catalog needs one digest, and swift-crypto brought
/// BoringSSL's ~250 C++ files into every clean build. Portable Swift: 120–150 MB/s on one core of a Xeon where
/// coreutils' `sha256sum` (the SHA extensions) does ~850 — a model file is hashed when fetched, and
/// `ember fetch` re-checks the default models' 423 MB in about 3 s. Checked against the FIPS 180-4 examples and
/// `sha256sum` at every padding boundary.
public struct SHA256Hasher: Sendable {
    private var state: [UInt32] = [0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a,
                                   0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19]
    /// Bytes not yet compressed: fewer than a block.
    private var pending: [UInt8] = []
    /// Bytes fed so far.
    private var length: UInt64 = 0

    /// A hasher that has seen nothing.
    public init() {}

    /// Feeds `bytes`.
    public mutating func update(bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        length &+= UInt64(bytes.count)
        var offset = 0
        if !pending.isEmpty {
            offset = min(64 - pending.count, bytes.count)
            pending.append(contentsOf: bytes[0..<offset])
            guard pending.count == 64 else { return }
            let block = pending
            block.withUnsafeBytes { compress($0) }
            pending.removeAll(keepingCapacity: true)
        }
        let whole = (bytes.count - offset) / 64 * 64
        if whole > 0 { compress(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + whole])) }
        pending.append(contentsOf: bytes[(offset + whole)...])
    }

    /// Feeds every byte of `data`, region by region.
    public mutating func update<Bytes: DataProtocol>(data: Bytes) {
        for region in data.regions { region.withUnsafeBytes { update(bytes: $0) } }
    }

    /// The digest of everything fed so far (32 bytes); the hasher itself is unchanged.
    public func finalize() -> [UInt8] {
        var copy = self
        var tail = pending + [0x80]
        tail += [UInt8](repeating: 0, count: (119 - pending.count) % 64) // to 56 bytes past a block boundary
        let bits = length &* 8
        tail += (0..<8).map { UInt8(truncatingIfNeeded: bits >> (56 - 8 * UInt64($0))) }
        tail.withUnsafeBytes { copy.compress($0) }
        return copy.state.flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> (24 - 8 * UInt32($0))) } }
    }

    /// The digest of `data`.
    public static func hash<Bytes: DataProtocol>(data: Bytes) -> [UInt8] {
        var hasher = SHA256Hasher()
        hasher.update(data: data)
        return hasher.finalize()
    }

    /// Runs the compression function over each 64-byte block of `blocks` (a whole number of them).
    private mutating func compress(_ blocks: UnsafeRawBufferPointer) {
        var (a0, b0, c0, d0, e0, f0, g0, h0) = (state[0], state[1], state[2], state[3], state[4], state[5], state[6], state[7])
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { schedule in
            Self.roundConstants.withUnsafeBufferPointer { constants in
                var start = 0
                while start < blocks.count {
                    for index in 0..<16 {
                        schedule[index] = UInt32(bigEndian: blocks.loadUnaligned(fromByteOffset: start &+ 4 &* index, as: UInt32.self))
                    }
                    for index in 16..<64 {
                        let early = schedule[index &- 15], late = schedule[index &- 2]
                        let sigma0 = rotate(early, 7) ^ rotate(early, 18) ^ (early >> 3)
                        let sigma1 = rotate(late, 17) ^ rotate(late, 19) ^ (late >> 10)
                        schedule[index] = schedule[index &- 16] &+ sigma0 &+ schedule[index &- 7] &+ sigma1
                    }
                    var (a, b, c, d, e, f, g, h) = (a0, b0, c0, d0, e0, f0, g0, h0)
                    var index = 0
                    while index < 64 {
                        // Eight rounds with the variables' roles renamed instead of moved.
                        round(a, b, c, &d, e, f, g, &h, constants[index] &+ schedule[index])
                        round(h, a, b, &c, d, e, f, &g, constants[index &+ 1] &+ schedule[index &+ 1])
                        round(g, h, a, &b, c, d, e, &f, constants[index &+ 2] &+ schedule[index &+ 2])
                        round(f, g, h, &a, b, c, d, &e, constants[index &+ 3] &+ schedule[index &+ 3])
                        round(e, f, g, &h, a, b, c, &d, constants[index &+ 4] &+ schedule[index &+ 4])
                        round(d, e, f, &g, h, a, b, &c, constants[index &+ 5] &+ schedule[index &+ 5])
                        round(c, d, e, &f, g, h, a, &b, constants[index &+ 6] &+ schedule[index &+ 6])
                        round(b, c, d, &e, f, g, h, &a, constants[index &+ 7] &+ schedule[index &+ 7])
                        index &+= 8
                    }
                    a0 &+= a; b0 &+= b; c0 &+= c; d0 &+= d; e0 &+= e; f0 &+= f; g0 &+= g; h0 &+= h
                    start &+= 64
                }
            }
        }
        state = [a0, b0, c0, d0, e0, f0, g0, h0]
    }

    /// The first 32 bits of the fractional parts of the cube roots of the first 64 primes (FIPS 180-4, 4.2.2).
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
}

/// One round (FIPS 180-4, 6.2.2 step 3) with the working variables in the order a...h: `d` and `h` are the ones it
/// changes (the caller renames the rest from round to round). `input` is the round's constant plus its schedule word.
@inline(__always)
private func round(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: inout UInt32,
                   _ e: UInt32, _ f: UInt32, _ g: UInt32, _ h: inout UInt32, _ input: UInt32) {
    let first = h &+ (rotate(e, 6) ^ rotate(e, 11) ^ rotate(e, 25)) &+ ((e & f) ^ (~e & g)) &+ input
    d &+= first
    h = first &+ (rotate(a, 2) ^ rotate(a, 13) ^ rotate(a, 22)) &+ ((a & b) ^ (a & c) ^ (b & c))
}

@inline(__always)
private func rotate(_ word: UInt32, _ count: UInt32) -> UInt32 { (word >> count) | (word << (32 &- count)) }
