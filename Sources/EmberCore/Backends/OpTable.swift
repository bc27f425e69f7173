import _CEmberKernels
import Foundation

/// A backend's op functions with the plugin ABI's C signatures (`ember_plugin.h`),
/// and the context pointer each takes first. Built-in backends fill it with
/// `CKernels/backend_ops.c`; a plugin's comes from its `ember_backend` table.
public struct OpTable: @unchecked Sendable {
    /// Handed back to every function.
    public var context: UnsafeMutableRawPointer?
    /// Whether calls go through the fault guard (a plugin's functions).
    public var guarded: Bool
    /// One table row to fp32.
    public var embedding: ember_embedding_fn?
    /// RMS normalization.
    public var rmsNorm: ember_rms_norm_fn?
    /// Layer normalization.
    public var layerNorm: ember_layer_norm_fn?
    /// Rotary position embedding.
    public var rope: ember_rope_fn?
    /// Attention scores of one head.
    public var attentionScores: ember_attention_scores_fn?
    /// Row-wise softmax.
    public var softmax: ember_softmax_fn?
    /// Attention's weighted sum of one head's values.
    public var attentionValues: ember_attention_values_fn?
    /// One head's attention in one pass (online softmax).
    public var attention: ember_attention_fn?
    /// The heads that share one key/value head in one pass over it: the built-in backends' form of `attention`
    /// (not in the plugin ABI; nil for plugins, whose `attention` then runs once per head).
    public var attentionGroup: ek_attention_group_fn?
    /// SiLU in place.
    public var silu: ember_unary_fn?
    /// GELU in place.
    public var gelu: ember_unary_fn?
    /// silu(gate)·up.
    public var swiglu: ember_swiglu_fn?
    /// gelu(gate)·up (GELU's tanh form).
    public var geglu: ember_swiglu_fn?
    /// One head's bidirectional attention over a whole sequence.
    public var sequenceAttention: ember_sequence_attention_fn?
    /// x += y.
    public var add: ember_binary_fn?
    /// x *= y.
    public var mul: ember_binary_fn?

    /// A table with no functions.
    public init(context: UnsafeMutableRawPointer? = nil, guarded: Bool = false) {
        self.context = context
        self.guarded = guarded
    }

    /// Ember's CPU ops (`backend_ops.c`) running the ISA `context` names (the portable oracle for scalar); `context`
    /// must live as long as the table is used (the backend owns it).
    static func builtIn(context: UnsafeMutablePointer<ek_backend_context>) -> OpTable {
        var table = OpTable(context: UnsafeMutableRawPointer(context))
        table.embedding = ek_op_embedding
        table.rmsNorm = ek_op_rms_norm
        table.layerNorm = ek_op_layer_norm
        table.rope = ek_op_rope
        table.attentionScores = ek_op_attention_scores
        table.softmax = ek_op_softmax
        table.attentionValues = ek_op_attention_values
        table.attention = ek_op_attention
        table.attentionGroup = ek_op_attention_group
        table.silu = ek_op_silu
        table.gelu = ek_op_gelu
        table.swiglu = ek_op_swiglu
        table.geglu = ek_op_geglu
        table.sequenceAttention = ek_op_sequence_attention
        table.add = ek_op_add
        table.mul = ek_op_mul
        return table
    }

    /// Whether the table has a function for `op` (matmul and activation quantization are bound per weight instead).
    public func has(_ op: Op) -> Bool {
        switch op {
        case .matmul, .quantizeActivations: false
        case .embedding: embedding != nil
        case .rmsNorm: rmsNorm != nil
        case .layerNorm: layerNorm != nil
        case .rope: rope != nil
        case .attentionScores: attentionScores != nil
        case .softmax: softmax != nil
        case .attentionValues: attentionValues != nil
        case .attention: attention != nil
        case .silu: silu != nil
        case .gelu: gelu != nil
        case .swiglu: swiglu != nil
        case .geglu: geglu != nil
        case .sequenceAttention: sequenceAttention != nil
        case .add: add != nil
        case .mul: mul != nil
        }
    }
}

/// Whether a backend may still be used, and why not: set once, when the
/// backend crashes, returns an error or computes wrong results. Read on every
/// call of its ops without a lock.
public final class BackendHealth: @unchecked Sendable {
    private let flag = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
    private let lock = NSLock()
    private var why: String?
    private let onDisable: @Sendable (String) -> Void

    /// A healthy backend; `onDisable` hears the reason once, when it is disabled.
    public init(onDisable: @escaping @Sendable (String) -> Void = { _ in }) {
        flag.initialize(to: 0)
        self.onDisable = onDisable
    }

    deinit { flag.deallocate() }

    /// Whether the backend was disabled.
    public var isDisabled: Bool { ek_flag_load(flag) != 0 }

    /// Why it was disabled, nil while it is healthy.
    public var reason: String? { lock.withLock { why } }

    /// Disables it with `reason` (the first reason is kept).
    public func disable(_ reason: String) {
        let first = lock.withLock { () -> Bool in
            guard why == nil else { return false }
            why = reason
            return true
        }
        ek_flag_store(flag, 1)
        if first { onDisable(reason) }
    }
}

/// One op of a forward pass as the pass calls it: the function of the backend
/// it was placed on, and the scalar reference's for the same op to fall back
/// to. A call that fails (non-zero status, or a plugin's crash caught by the
/// guard) disables the backend with the reason and runs the fallback on the
/// same inputs — an in-place call's data is copied first when the backend is a
/// plugin — so the pass still completes and the following calls skip it.
public final class BoundOp: @unchecked Sendable {
    /// Where the op was placed, and why.
    public let placement: Placement
    let primary: OpTable
    let fallback: OpTable
    let health: BackendHealth?
    let serializer: NSLock?
    /// The backends whose tables' contexts `primary` and `fallback` point into: kept alive with the op.
    let owners: [AnyObject]

    /// `placement`'s op on `primary` (a plugin's with `health` and, when it cannot run concurrently, a `serializer`),
    /// falling back to `fallback`; `owners` keep the tables' contexts alive.
    init(placement: Placement, primary: OpTable, fallback: OpTable, health: BackendHealth?, serializer: NSLock?, owners: [AnyObject]) {
        self.placement = placement
        self.primary = primary
        self.fallback = fallback
        self.health = health
        self.serializer = serializer
        self.owners = owners
    }

    /// Runs `call` on the primary table unless its backend is disabled; on failure disables it and runs `call` on the fallback.
    /// `saving`/`restoring` copy an in-place op's data around a plugin's attempt.
    @inline(__always)
    private func run(saving buffer: UnsafeMutablePointer<Float>? = nil, count: Int = 0,
                     _ call: (OpTable) -> Int32?) -> Int32 {
        if health?.isDisabled != true {
            var saved: [Float]? = nil
            if primary.guarded, let buffer { saved = Array(UnsafeBufferPointer(start: buffer, count: count)) }
            let status: Int32?
            if let serializer {
                status = serializer.withLock { call(primary) }
            } else {
                status = call(primary)
            }
            if let status, status == 0 { return 0 }
            if let saved, let buffer { saved.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress!, count: count) } }
            if let health {
                let what = status.map { Int($0) } == Int(EK_GUARD_CRASHED) ? "crashed with \(signalName(ek_guard_last_signal()))" : "returned \(status.map(String.init) ?? "no function")"
                health.disable("\(placement.op) \(what)")
            }
        }
        return call(fallback) ?? 1
    }

    /// One `columns`-value row of a table in `type` at `row` into `out`.
    public func embedding(type: TensorType, row: UnsafeRawPointer, columns: Int, into out: UnsafeMutablePointer<Float>) -> Int32 {
        run { t in
            t.embedding.map { f in
                t.guarded ? ek_guarded_embedding(f, t.context, type.id, row, Int64(columns), out) : f(t.context, type.id, row, Int64(columns), out)
            }
        }
    }

    /// RMS normalization of `rows` rows of `n`.
    public func rmsNorm(_ x: UnsafePointer<Float>, weight: UnsafePointer<Float>, into out: UnsafeMutablePointer<Float>,
                        rows: Int, n: Int, eps: Float) -> Int32 {
        run(saving: UnsafeMutablePointer(mutating: x) == out ? out : nil, count: rows * n) { t in
            t.rmsNorm.map { f in
                t.guarded ? ek_guarded_rms_norm(f, t.context, x, weight, out, Int64(rows), Int64(n), eps)
                    : f(t.context, x, weight, out, Int64(rows), Int64(n), eps)
            }
        }
    }

    /// Layer normalization of `rows` rows of `n`.
    public func layerNorm(_ x: UnsafePointer<Float>, gamma: UnsafePointer<Float>, beta: UnsafePointer<Float>,
                          into out: UnsafeMutablePointer<Float>, rows: Int, n: Int, eps: Float) -> Int32 {
        run(saving: UnsafeMutablePointer(mutating: x) == out ? out : nil, count: rows * n) { t in
            t.layerNorm.map { f in
                t.guarded ? ek_guarded_layer_norm(f, t.context, x, gamma, beta, out, Int64(rows), Int64(n), eps)
                    : f(t.context, x, gamma, beta, out, Int64(rows), Int64(n), eps)
            }
        }
    }

    /// RoPE on `heads` heads of `headDim` at `x`, by `angles`, in `mode` (0 adjacent pairs, 2 NeoX).
    public func rope(_ x: UnsafeMutablePointer<Float>, heads: Int, headDim: Int, angles: UnsafePointer<Float>, mode: UInt32) -> Int32 {
        run(saving: x, count: heads * headDim) { t in
            t.rope.map { f in
                t.guarded ? ek_guarded_rope(f, t.context, x, Int64(heads), Int64(headDim), angles, mode)
                    : f(t.context, x, Int64(heads), Int64(headDim), angles, mode)
            }
        }
    }

    /// Scores of one head over `visible` cached keys of `cacheType`.
    public func attentionScores(cacheType: TensorType, query: UnsafePointer<Float>, keys: UnsafeRawPointer, stride: Int,
                                visible: Int, headDim: Int, scale: Float, into scores: UnsafeMutablePointer<Float>) -> Int32 {
        run { t in
            t.attentionScores.map { f in
                t.guarded
                    ? ek_guarded_attention_scores(f, t.context, cacheType.id, query, keys, Int64(stride), Int64(visible), Int64(headDim), scale, scores)
                    : f(t.context, cacheType.id, query, keys, Int64(stride), Int64(visible), Int64(headDim), scale, scores)
            }
        }
    }

    /// Softmax of `rows` rows of `n`, in place.
    public func softmax(_ x: UnsafeMutablePointer<Float>, rows: Int, n: Int) -> Int32 {
        run(saving: x, count: rows * n) { t in
            t.softmax.map { f in t.guarded ? ek_guarded_softmax(f, t.context, x, Int64(rows), Int64(n)) : f(t.context, x, Int64(rows), Int64(n)) }
        }
    }

    /// One head's weighted sum of `visible` cached values of `cacheType`.
    public func attentionValues(cacheType: TensorType, weights: UnsafePointer<Float>, values: UnsafeRawPointer, stride: Int,
                                visible: Int, headDim: Int, into out: UnsafeMutablePointer<Float>) -> Int32 {
        run { t in
            t.attentionValues.map { f in
                t.guarded
                    ? ek_guarded_attention_values(f, t.context, cacheType.id, weights, values, Int64(stride), Int64(visible), Int64(headDim), out)
                    : f(t.context, cacheType.id, weights, values, Int64(stride), Int64(visible), Int64(headDim), out)
            }
        }
    }

    /// One head's attention over `visible` cached keys and values of `cacheType` in one pass (online softmax).
    public func attention(cacheType: TensorType, query: UnsafePointer<Float>, keys: UnsafeRawPointer,
                          values: UnsafeRawPointer, stride: Int, visible: Int, headDim: Int, scale: Float,
                          into out: UnsafeMutablePointer<Float>) -> Int32 {
        run { t in Self.attention(t, cacheType: cacheType, query: query, keys: keys, values: values, stride: stride,
                                  visible: visible, headDim: headDim, scale: scale, into: out) }
    }

    /// `t`'s one-pass attention of one head (through the fault guard for a plugin's); nil when it has none.
    private static func attention(_ t: OpTable, cacheType: TensorType, query: UnsafePointer<Float>, keys: UnsafeRawPointer,
                                  values: UnsafeRawPointer, stride: Int, visible: Int, headDim: Int, scale: Float,
                                  into out: UnsafeMutablePointer<Float>) -> Int32? {
        t.attention.map { f in
            t.guarded
                ? ek_guarded_attention(f, t.context, cacheType.id, query, keys, values, Int64(stride), Int64(visible), Int64(headDim),
                                       scale, out)
                : f(t.context, cacheType.id, query, keys, values, Int64(stride), Int64(visible), Int64(headDim), scale, out)
        }
    }

    /// `heads` query heads that share one key/value head (head j's query at `queries` + j·headDim, its output at
    /// `out` + j·headDim) over the same `visible` cached keys and values: in one pass over them where the backend has
    /// the grouped form (the built-in ones) and more than one head, else its one-pass `attention` once per head.
    public func attention(cacheType: TensorType, queries: UnsafePointer<Float>, heads: Int, keys: UnsafeRawPointer,
                          values: UnsafeRawPointer, stride: Int, visible: Int, headDim: Int, scale: Float,
                          into out: UnsafeMutablePointer<Float>) -> Int32 {
        run { t in
            if heads > 1, let group = t.attentionGroup, !t.guarded {
                return group(t.context, cacheType.id, queries, Int64(heads), keys, values, Int64(stride), Int64(visible),
                             Int64(headDim), scale, out)
            }
            for head in 0..<heads {
                let status = Self.attention(t, cacheType: cacheType, query: queries + head * headDim, keys: keys, values: values,
                                            stride: stride, visible: visible, headDim: headDim, scale: scale, into: out + head * headDim)
                if status != 0 { return status }
            }
            return 0
        }
    }

    /// One head's bidirectional attention over a sequence of `rows` positions: every query row against every key and
    /// value row, all `stride` elements apart (keys and values of `cacheType`), into `out` (rows as the queries').
    public func sequenceAttention(cacheType: TensorType, queries: UnsafePointer<Float>, keys: UnsafeRawPointer,
                                  values: UnsafeRawPointer, stride: Int, rows: Int, headDim: Int, scale: Float,
                                  into out: UnsafeMutablePointer<Float>) -> Int32 {
        run { t in
            t.sequenceAttention.map { f in
                t.guarded
                    ? ek_guarded_sequence_attention(f, t.context, cacheType.id, queries, keys, values, Int64(stride), Int64(rows),
                                                    Int64(headDim), scale, out)
                    : f(t.context, cacheType.id, queries, keys, values, Int64(stride), Int64(rows), Int64(headDim), scale, out)
            }
        }
    }

    /// gelu(gate)·up over `n` values (GELU's tanh form).
    public func geglu(gate: UnsafePointer<Float>, up: UnsafePointer<Float>, into out: UnsafeMutablePointer<Float>, count n: Int) -> Int32 {
        run { t in
            t.geglu.map { f in
                t.guarded ? ek_guarded_swiglu(f, t.context, gate, up, out, Int64(n)) : f(t.context, gate, up, out, Int64(n))
            }
        }
    }

    /// GELU of `n` values in place.
    public func gelu(_ x: UnsafeMutablePointer<Float>, count n: Int) -> Int32 {
        run(saving: x, count: n) { t in
            t.gelu.map { f in t.guarded ? ek_guarded_unary(f, t.context, x, Int64(n)) : f(t.context, x, Int64(n)) }
        }
    }

    /// SiLU of `n` values in place.
    public func silu(_ x: UnsafeMutablePointer<Float>, count n: Int) -> Int32 {
        run(saving: x, count: n) { t in
            t.silu.map { f in t.guarded ? ek_guarded_unary(f, t.context, x, Int64(n)) : f(t.context, x, Int64(n)) }
        }
    }

    /// silu(gate)·up over `n` values.
    public func swiglu(gate: UnsafePointer<Float>, up: UnsafePointer<Float>, into out: UnsafeMutablePointer<Float>, count n: Int) -> Int32 {
        run { t in
            t.swiglu.map { f in
                t.guarded ? ek_guarded_swiglu(f, t.context, gate, up, out, Int64(n)) : f(t.context, gate, up, out, Int64(n))
            }
        }
    }

    /// x += y over `n` values.
    public func add(_ x: UnsafeMutablePointer<Float>, _ y: UnsafePointer<Float>, count n: Int) -> Int32 {
        run(saving: x, count: n) { t in
            t.add.map { f in t.guarded ? ek_guarded_binary(f, t.context, x, y, Int64(n)) : f(t.context, x, y, Int64(n)) }
        }
    }

    /// x[r·xStride + i] += y[r·yStride + i] for `rows` rows of `n` values — one call into the backend for every row
    /// (a bias is `yStride` 0); the per-row cost of a call through the placement machinery was 12 % of an int8 MiniLM
    /// batch.
    public func addRows(_ x: UnsafeMutablePointer<Float>, stride xStride: Int, _ y: UnsafePointer<Float>, stride yStride: Int,
                        rows: Int, count n: Int) -> Int32 {
        guard rows > 0, n > 0 else { return 0 }
        return run(saving: x, count: (rows - 1) * xStride + n) { t in
            t.add.map { f in
                for row in 0..<rows {
                    let (target, addend) = (x + row * xStride, y + row * yStride)
                    let status = t.guarded ? ek_guarded_binary(f, t.context, target, addend, Int64(n)) : f(t.context, target, addend, Int64(n))
                    if status != 0 { return status }
                }
                return 0
            }
        }
    }

    /// x *= y over `n` values.
    public func mul(_ x: UnsafeMutablePointer<Float>, _ y: UnsafePointer<Float>, count n: Int) -> Int32 {
        run(saving: x, count: n) { t in
            t.mul.map { f in t.guarded ? ek_guarded_binary(f, t.context, x, y, Int64(n)) : f(t.context, x, y, Int64(n)) }
        }
    }
}

/// "SIGSEGV" for 11, and so on for the signals the guard catches.
func signalName(_ signal: Int32) -> String {
    switch signal {
    case SIGSEGV: "signal SIGSEGV"
    case SIGBUS: "signal SIGBUS"
    case SIGILL: "signal SIGILL"
    case SIGFPE: "signal SIGFPE"
    default: "signal \(signal)"
    }
}
