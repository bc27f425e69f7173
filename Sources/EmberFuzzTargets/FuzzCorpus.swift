import EmberCore
import Foundation

/// Corpora and the mutation replay `make test` runs: the seed inputs, then random mutations of them — the
/// regression pass of fuzzing, without libFuzzer's instrumentation.
public enum FuzzCorpus {
    /// The files at `path`: itself, or every regular file under it.
    public static func files(at path: String) -> [String] {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { return [] }
        guard isFolder.boolValue else { return [path] }
        let names = (try? FileManager.default.subpathsOfDirectory(atPath: path)) ?? []
        return names.sorted().map { path + "/" + $0 }.filter {
            var folder: ObjCBool = false
            return FileManager.default.fileExists(atPath: $0, isDirectory: &folder) && !folder.boolValue
        }
    }

    /// What a replay did.
    public struct Report: Sendable {
        /// Seed inputs run.
        public var inputs: Int
        /// Mutations run.
        public var mutations: Int
        /// Wall time.
        public var seconds: Double
    }

    /// Runs `target` on each input, then on `mutations` mutants drawn with `seed`.
    public static func replay(_ target: FuzzTarget, inputs: [Data], mutations: Int, seed: UInt64,
                              environment: FuzzTarget.Environment) -> Report {
        let start = Date()
        for input in inputs { target.run(input, in: environment) }
        var generator = SplitMix64(seed: seed)
        for _ in 0..<(inputs.isEmpty ? 0 : mutations) {
            let base = inputs[Int(generator.next() % UInt64(inputs.count))]
            let other = inputs[Int(generator.next() % UInt64(inputs.count))]
            target.run(mutate(base, other: other, using: &generator), in: environment)
        }
        return Report(inputs: inputs.count, mutations: inputs.isEmpty ? 0 : mutations, seconds: Date().timeIntervalSince(start))
    }

    /// One to four edits of `data`: a byte flipped or set, a run inserted, removed or copied from `other`, a
    /// 1/2/4/8-byte little-endian number set to an extreme (0, 1, −1, 2³¹, 2³²−1, 2⁶³−1, …).
    public static func mutate(_ data: Data, other: Data, using generator: inout SplitMix64) -> Data {
        var bytes = [UInt8](data)
        for _ in 0...(generator.next() % 4) {
            let position = bytes.isEmpty ? 0 : Int(generator.next() % UInt64(bytes.count))
            switch generator.next() % 6 {
            case 0 where !bytes.isEmpty: bytes[position] ^= UInt8(1 << (generator.next() % 8))
            case 1 where !bytes.isEmpty: bytes[position] = UInt8(truncatingIfNeeded: generator.next())
            case 2: bytes.insert(contentsOf: (0..<(1 + generator.next() % 16)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }, at: position)
            case 3 where !bytes.isEmpty: bytes.removeSubrange(position..<min(bytes.count, position + 1 + Int(generator.next() % 64)))
            case 4 where !other.isEmpty:
                let from = Int(generator.next() % UInt64(other.count))
                let run = [UInt8](other[other.startIndex + from ..< other.startIndex + min(other.count, from + 1 + Int(generator.next() % 64))])
                bytes.insert(contentsOf: run, at: position)
            default:
                let extremes: [UInt64] = [0, 1, .max, 1 << 31, (1 << 32) - 1, 1 << 32, (1 << 63) - 1, 1 << 63, 0x7f7f_ffff, 0x7fc0_0000]
                let value = extremes[Int(generator.next() % UInt64(extremes.count))]
                let width = [1, 2, 4, 8][Int(generator.next() % 4)]
                for byte in 0..<width where position + byte < bytes.count { bytes[position + byte] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(byte))) }
            }
        }
        return Data(bytes)
    }
}
