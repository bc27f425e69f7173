import CKernels
import Foundation

extension LlamaModel {
    /// One conversation's state: the KV cache, sized from the context asked
    /// for, and the buffers a forward pass reuses.
    ///
    /// With `halfPrecision` (the default, as llama.cpp's) keys and values are
    /// stored as fp16 — half the memory — and the attention products round
    /// their other operand to fp16, as llama.cpp's f16 dot products do.
    /// Without it they are kept in fp32.
    public final class Session: @unchecked Sendable {
        /// Tokens the KV cache holds at most.
        public let capacity: Int
        /// Whether keys and values are stored as fp16 (true) or fp32.
        public let halfPrecision: Bool
        /// Tokens the KV cache holds now, 0…`capacity`; the next token fed goes at this position.
        public private(set) var position = 0
        /// Energy of every forward pass of this session so far.
        public var energy: EnergyEstimate { energyTotal ?? EnergyEstimate(joules: 0, source: .modelled) }
        var energyTotal: EnergyEstimate?
        let kvWidth: Int
        /// Per layer: keys then values, each [capacity × kvWidth] of fp16 or fp32.
        let cache: [UnsafeMutableRawPointer]
        var workspace: Workspace?

        init(config: Config, capacity: Int, halfPrecision: Bool) {
            self.capacity = capacity
            self.halfPrecision = halfPrecision
            kvWidth = config.kvHeads * config.headDim
            let bytes = 2 * capacity * kvWidth * (halfPrecision ? 2 : 4)
            cache = (0..<config.layers).map { _ in
                let buffer = UnsafeMutableRawPointer.allocate(byteCount: max(bytes, 1), alignment: 64)
                buffer.initializeMemory(as: UInt8.self, repeating: 0, count: max(bytes, 1))
                return buffer
            }
        }

        deinit { for buffer in cache { buffer.deallocate() } }

        /// Bytes the KV cache takes.
        public var cacheBytes: Int { cache.count * 2 * capacity * kvWidth * (halfPrecision ? 2 : 4) }

        /// Layer `layer`'s keys (values follow at ``valueOffset``), element `index` in bytes.
        func keys(_ layer: Int) -> UnsafeMutableRawPointer { cache[layer] }
        func values(_ layer: Int) -> UnsafeMutableRawPointer { cache[layer] + capacity * kvWidth * (halfPrecision ? 2 : 4) }

        func advance(by count: Int) { position += count }

        /// Forgets everything after `position` (for example to re-run from a shared prefix).
        public func rewind(to position: Int) {
            self.position = max(0, min(position, self.position))
        }
    }

    /// A new, empty session whose KV cache holds `contextLength` tokens, capped at `config.contextLength` (at least 1); fp16 unless `halfPrecisionCache` is false.
    public func makeSession(contextLength: Int = 2048, halfPrecisionCache: Bool = true) -> Session {
        Session(config: config, capacity: max(1, min(contextLength, config.contextLength)), halfPrecision: halfPrecisionCache)
    }
}

/// Buffers for a forward pass of up to `rows` tokens, reused from step to step.
final class Workspace {
    let rows: Int
    let threads: Int
    private let arena: BufferArena

    // Shared [rows × width] fp32 activations.
    let x, normed, q, k, v, attention, projected, gate, up, hidden: UnsafeMutablePointer<Float>
    /// RoPE (cos, sin) per row.
    let rope: UnsafeMutablePointer<Float>
    /// Prepared activations and per-thread inputs of the stages.
    let stages: StageBuffers
    /// Per thread: attention scores.
    let scores: [UnsafeMutablePointer<Float>]

    init(config: LlamaModel.Config, rows: Int, threads: Int, capacity: Int) {
        self.rows = rows
        self.threads = threads
        let arena = BufferArena()
        let floats = arena.floats
        let (d, ff, kvWidth) = (config.hidden, config.feedForward, config.kvHeads * config.headDim)
        let width = max(d, ff)
        x = floats(rows * d); normed = floats(rows * d); q = floats(rows * d)
        k = floats(rows * kvWidth); v = floats(rows * kvWidth)
        attention = floats(rows * d); projected = floats(rows * d)
        gate = floats(rows * ff); up = floats(rows * ff); hidden = floats(rows * ff)
        rope = floats(rows * config.headDim)
        stages = StageBuffers(rows: rows, width: width, threads: threads)
        scores = (0..<threads).map { _ in floats(capacity) }
        self.arena = arena
    }
}
