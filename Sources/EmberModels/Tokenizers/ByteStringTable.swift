/// Token ids by their exact UTF-8 bytes, for vocabularies of hundreds of
/// thousands of tokens: every token's bytes in one buffer and an
/// open-addressing hash table of ids, so building it allocates three arrays
/// (not one per token) and a lookup of any byte range allocates nothing.
/// Bytes, not Swift strings: strings compare canonically equivalent text as
/// equal ("fé" composed and decomposed), tokenizers compare bytes.
struct ByteStringTable: Sendable {
    private let bytes: [UInt8]
    private let offsets: [Int32]      // token i is bytes[offsets[i]..<offsets[i + 1]]
    private let slots: [Int32]        // token id + 1, 0 for empty; the first id of equal byte strings wins
    private let mask: Int

    /// A table of `tokens` (ids are their indices).
    init(_ tokens: [String]) {
        var bytes: [UInt8] = [], offsets: [Int32] = [0]
        bytes.reserveCapacity(tokens.count * 8)
        offsets.reserveCapacity(tokens.count + 1)
        for token in tokens {
            bytes.append(contentsOf: token.utf8)
            offsets.append(Int32(bytes.count))
        }
        var capacity = 16
        while capacity < tokens.count * 2 { capacity *= 2 }
        var slots = [Int32](repeating: 0, count: capacity)
        let mask = capacity - 1
        bytes.withUnsafeBufferPointer { all in
            for id in tokens.indices {
                let token = UnsafeBufferPointer(rebasing: all[Int(offsets[id])..<Int(offsets[id + 1])])
                var slot = Self.hash(token) & mask
                while slots[slot] != 0 {
                    let other = Int(slots[slot]) - 1
                    if all[Int(offsets[other])..<Int(offsets[other + 1])].elementsEqual(token) { break }
                    slot = (slot + 1) & mask
                }
                if slots[slot] == 0 { slots[slot] = Int32(id + 1) }
            }
        }
        (self.bytes, self.offsets, self.slots, self.mask) = (bytes, offsets, slots, mask)
    }

    /// The id of the token whose bytes are exactly `key`, if any.
    func id(of key: UnsafeBufferPointer<UInt8>) -> Int? {
        var slot = Self.hash(key) & mask
        return bytes.withUnsafeBufferPointer { all in
            while slots[slot] != 0 {
                let id = Int(slots[slot]) - 1
                if all[Int(offsets[id])..<Int(offsets[id + 1])].elementsEqual(key) { return id }
                slot = (slot + 1) & mask
            }
            return nil
        }
    }

    /// The id of the token spelled `text`, if any.
    func id(of text: String) -> Int? {
        var text = text
        return text.withUTF8 { id(of: $0) }
    }

    /// The id of the token whose bytes are `key`, if any.
    func id(of key: ArraySlice<UInt8>) -> Int? { key.withUnsafeBufferPointer { id(of: $0) } }

    /// FNV-1a over the bytes.
    private static func hash(_ key: UnsafeBufferPointer<UInt8>) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int(truncatingIfNeeded: hash ^ (hash >> 29))
    }
}
