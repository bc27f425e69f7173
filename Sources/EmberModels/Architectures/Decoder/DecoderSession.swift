import _CEmberKernels
import EmberCore
import Foundation

/// One conversation's state with a ``DecoderModel``: the KV cache, sized
/// from the context asked for, and the buffers a forward pass reuses.
///
/// With `halfPrecision` (the default, as llama.cpp's) keys and values are
/// stored as fp16 — half the memory — and the attention products round
/// their other operand to fp16, as llama.cpp's f16 dot products do.
/// Without it they are kept in fp32.
final class DecoderSession: GenerationSession, @unchecked Sendable {
    let capacity: Int
    /// Whether keys and values are stored as fp16 (true) or fp32.
    let halfPrecision: Bool
    private(set) var position = 0
    var energy: EnergyEstimate { energyTotal ?? EnergyEstimate(joules: 0, source: .modelled) }
    var energyTotal: EnergyEstimate?
    /// Key/value heads and the width of one.
    let kvHeads: Int, headDim: Int
    /// The width of one position's keys (or values): every key/value head's.
    var kvWidth: Int { kvHeads * headDim }
    /// Per layer: keys then values, each [kvHeads × capacity × headDim] of fp16 or fp32 — a head's rows side by side,
    /// so attention streams one run of memory per head (``slot(head:position:)``) — each layer from a page boundary of
    /// `memory`.
    let cache: [UnsafeMutableRawPointer]
    /// The pages of the whole cache, mapped for this session and unmapped with it (``PageMemory``).
    private let memory: PageMemory
    var workspace: DecoderWorkspace?
    /// The threads of this session's single-token steps, from their measured times (nil before the first).
    var stepThreads: StepThreadChooser?

    init(config: DecoderModel.Config, capacity: Int, halfPrecision: Bool) {
        self.capacity = capacity
        self.halfPrecision = halfPrecision
        (kvHeads, headDim) = (config.kvHeads, config.headDim)
        let layerBytes = PageMemory.roundedToPages(2 * capacity * config.kvWidth * (halfPrecision ? 2 : 4)) // 0: one page, shared
        let memory = PageMemory(byteCount: layerBytes * config.layers) // zero until written
        cache = (0..<config.layers).map { memory.baseAddress + $0 * layerBytes }
        self.memory = memory
    }

    /// The type keys and values are cached in.
    var cacheType: TensorType { halfPrecision ? .f16 : .f32 }

    /// The pages mapped for the cache: each layer's keys and values rounded up to whole pages.
    var cacheBytes: Int { memory.byteCount }

    /// Bytes of one cached element: 2 (fp16) or 4 (fp32).
    var elementBytes: Int { halfPrecision ? 2 : 4 }

    /// Layer `layer`'s keys; its values follow.
    func keys(_ layer: Int) -> UnsafeMutableRawPointer { cache[layer] }
    func values(_ layer: Int) -> UnsafeMutableRawPointer { cache[layer] + capacity * kvWidth * elementBytes }

    /// Where key/value head `head`'s row for `position` starts, in bytes from ``keys(_:)`` (and from
    /// ``values(_:)``); the head's next position follows `headDim` elements on. Cached per head, not per position
    /// ([position][head] rows put a head's 128-byte rows 384 bytes apart in SmolLM2): one Zen 4 core, 30 layers'
    /// fp16 cache of 1,024 positions flushed from the caches each round, 11 rounds, 19–21 → 9 ns per position and
    /// query head.
    func slot(head: Int, position: Int) -> Int { (head * capacity + position) * headDim * elementBytes }

    func advance(by count: Int) { position += count }

    func rewind(to position: Int) {
        self.position = max(0, min(position, self.position))
    }

    func copyPrefix(of source: any GenerationSession, tokens: Int) -> Bool {
        guard let source = source as? DecoderSession, source !== self, source.cache.count == cache.count,
              source.kvHeads == kvHeads, source.headDim == headDim, source.halfPrecision == halfPrecision,
              tokens >= 0, tokens <= source.position, tokens <= capacity else { return false }
        let bytes = tokens * headDim * elementBytes
        for layer in cache.indices {
            for head in 0..<kvHeads {
                let (to, from) = (slot(head: head, position: 0), source.slot(head: head, position: 0))
                (keys(layer) + to).copyMemory(from: source.keys(layer) + from, byteCount: bytes)
                (values(layer) + to).copyMemory(from: source.values(layer) + from, byteCount: bytes)
            }
        }
        position = tokens
        return true
    }
}

/// Buffers for a forward pass of up to `rows` tokens, reused from step to step.
final class DecoderWorkspace {
    let rows: Int
    let threads: Int
    let preparedBytes: Int
    private let arena: BufferArena

    // Shared [rows × width] fp32 activations.
    let x, normed, q, k, v, attention, projected, gate, up, hidden: UnsafeMutablePointer<Float>
    /// RoPE (cos, sin) per row: of the global layers, and of the sliding layers (the same buffer without them).
    let rope, slidingRope: UnsafeMutablePointer<Float>
    /// Prepared activations and per-thread inputs of the stages.
    let stages: StageBuffers
    /// Where a decode step's threads deal out each matmul's columns (``DecoderPass/stealSite(_:_:)``); nil for one
    /// thread, or when out of memory (the static split then).
    let workRanges: WorkRanges?

    init(config: DecoderModel.Config, rows: Int, threads: Int, preparedBytes: (Int, Int) -> Int) {
        self.rows = rows
        self.threads = threads
        let arena = BufferArena()
        let floats = arena.floats
        let (d, ff, kvWidth, queries) = (config.hidden, config.feedForward, config.kvWidth, config.queryWidth)
        let width = max(d, ff, queries)
        x = floats(rows * d); normed = floats(rows * d); q = floats(rows * queries)
        k = floats(rows * kvWidth); v = floats(rows * kvWidth)
        attention = floats(rows * queries); projected = floats(rows * d)
        gate = floats(rows * ff); up = floats(rows * ff); hidden = floats(rows * ff)
        rope = floats(rows * config.headDim)
        slidingRope = config.slidingWindow == nil ? rope : floats(rows * config.headDim)
        stages = StageBuffers(rows: rows, width: width, threads: threads, preparedBytes: preparedBytes)
        self.preparedBytes = stages.preparedBytes
        workRanges = threads > 1 ? WorkRanges(sites: DecoderPass.stealSites(layers: config.layers), threads: threads) : nil
        self.arena = arena
    }
}
