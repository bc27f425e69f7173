import _CEmberKernels
import EmberCore
import Foundation

/// Which bound plan an encoder pass uses (the backends' generation: see `DecoderPlanKey`).
struct EncoderPlanKey: Hashable {
    let units: ComputeUnits
    let precision: Precision?
    let generation: Int
}

/// The encoder's non-matmul ops, each bound to its backend (the scalar reference as fallback).
struct EncoderOps {
    let embedding, layerNorm, attention, gelu, add: BoundOp

    init(registry: BackendRegistry, units: ComputeUnits) throws {
        embedding = try registry.bind(.embedding, type: .f32, units: units)
        layerNorm = try registry.bind(.layerNorm, type: .f32, units: units)
        attention = try registry.bind(.sequenceAttention, type: .f32, units: units)
        gelu = try registry.bind(.gelu, type: .f32, units: units)
        add = try registry.bind(.add, type: .f32, units: units)
    }
}

/// The encoder's ops bound for given units and precision.
final class EncoderPlan: @unchecked Sendable {
    struct LayerMatmuls {
        let query, key, value, attentionOutput, intermediate, output: BoundMatmul
        /// Q, K and V; the attention output; the intermediate; the output (made once, at bind time).
        let attention, projection, feedForward, downProjection: StageGroup

        init(query: BoundMatmul, key: BoundMatmul, value: BoundMatmul, attentionOutput: BoundMatmul,
             intermediate: BoundMatmul, output: BoundMatmul) {
            (self.query, self.key, self.value, self.attentionOutput) = (query, key, value, attentionOutput)
            (self.intermediate, self.output) = (intermediate, output)
            attention = StageGroup([query, key, value])
            projection = StageGroup([attentionOutput])
            feedForward = StageGroup([intermediate])
            downProjection = StageGroup([output])
        }
    }

    let layers: [LayerMatmuls]
    /// Bytes the bound matmuls keep of the weight matrices made for this plan alone (``WeightSource/made(_:)``),
    /// measured when bound: held as long as the plan is.
    let madeWeightBytes: Int
    let ops: EncoderOps
    let route: ComputeUnit
    let precision: Precision
    /// The most bytes a matmul's activation preparation needs for (rows, width).
    let preparedBytes: @Sendable (Int, Int) -> Int
    let report: ExecutionPlan

    /// Under int4, the layers of each block kept at int8 (by role: 0 query, 1 key,
    /// 2 value, 3 attention output, 4 intermediate, 5 output). Measured on the 20
    /// public sentences against sentence-transformers (min / mean cosine): all
    /// Q4_1 0.952 / 0.968; with least-squares scales 0.957 / 0.972; value and
    /// FFN output at int8 0.980 / 0.987; value, attention output and FFN output
    /// at int8 0.982 / 0.990 — the choice, with a margin over the 0.98 asked.
    /// Q4_0 was worse than Q4_1 throughout (0.930 all 4-bit).
    static let int4KeptAtInt8: Set<Int> = [2, 3, 5]
    /// The feed-forward input projection (role 4) is the most sensitive of the rest: on 1,015 natural sentences held
    /// out of every choice (licence texts and READMEs; library docstrings) the mix above gave min cosine 0.958–0.966
    /// to fp32; int8 for ffn_up alone in every layer 0.996 (but then little is left at 4 bits); in one layer at a time
    /// at most 0.977 (layer 4); in the layers from a third to five sixths of the depth (2, 3, 4 of MiniLM's 6)
    /// 0.9865 / 0.9847 — the choice, 0.5 MB more than all-4-bit ffn_up.
    static func int4KeepsFeedForwardUpAtInt8(layer: Int, of layers: Int) -> Bool {
        3 * layer >= layers && 6 * layer < 5 * layers
    }
    static let roles = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_up", "ffn_down"]

    /// Q8_0 values of the int8 encoder where int8 is multiplied without VNNI: within [−63, 63], so that VPMADDUBSW
    /// takes the weights (+64) as its unsigned operand with no saturation and no sign trick — as ONNX Runtime's
    /// `reduce_range` does for the same machines. MiniLM's int8 GEMMs on AVX2 without VNNI: 84-90 → 110-120 GOPS
    /// a core (64×1536×384); the embeddings' min cosine to fp32 on the public sentences: see the closing note.
    static let int8ValueLimitWithoutVNNI = 63

    /// The input slot (`EncoderPass.observer`'s numbering) of each role whose int8 weights take one scale per row
    /// against smoothed, row-scaled activations: Q, K and V (slot 0), the attention output (1), the feed-forward input
    /// projection (2). The feed-forward output projection (role 5) keeps a scale per 32 values on both sides: its
    /// GELU input is what smoothing did not tame (see `EncoderCalibration`).
    static let rowScaledSlot: [Int: Int] = [0: 0, 1: 0, 2: 0, 3: 1, 4: 2]

    /// Where the weights a linear layer runs on come from at a precision.
    enum WeightSource: Equatable {
        /// The matrix as loaded (fp32, or no precision asked for).
        case stored
        /// The loaded matrix's variant at this precision, made once and kept with it (``WeightMatrix/variant(for:)``).
        case variant(Precision)
        /// A matrix of this type made for the plan alone and kept with it: int8 with one scale per row or seven-bit
        /// values, int4's Q4_1 with least-squares scales.
        case made(TensorType)
    }

    /// Where the weights of a linear layer of `role` in layer `layer` (of `layers`) come from at `precision`;
    /// `sevenBitInt8`: int8 values within ``int8ValueLimitWithoutVNNI``. The one rule the plan binds with and the
    /// model predicts its weight copies from.
    static func source(role: Int, layer: Int, of layers: Int, precision: Precision?, sevenBitInt8: Bool) -> WeightSource {
        switch precision {
        case nil: return .stored
        case .int8?:
            // The roles of rowScaledSlot take one scale per row against smoothed activations (smoothing is measured
            // for every int8 plan).
            return rowScaledSlot[role] != nil || sevenBitInt8 ? .made(.q8_0) : .variant(.int8)
        case .int4?:
            let keptAtInt8 = int4KeptAtInt8.contains(role) || role == 4 && int4KeepsFeedForwardUpAtInt8(layer: layer, of: layers)
            return keptAtInt8 ? .variant(.int8) : .made(.q4_1)
        case let other?: return .variant(other)
        }
    }

    /// The weights a linear layer of `role` in layer `layer` (of `layers`) runs on at `precision` (see
    /// ``source(role:layer:of:precision:sevenBitInt8:)``); `columnScales` (int8, the roles of ``rowScaledSlot``)
    /// makes them one scale per row for activations multiplied by those column scales.
    static func weights(_ weights: WeightMatrix, role: Int, layer: Int, of layers: Int, precision: Precision?,
                        sevenBitInt8: Bool = false, columnScales: Tensor? = nil) throws -> WeightMatrix {
        switch source(role: role, layer: layer, of: layers, precision: precision, sevenBitInt8: sevenBitInt8) {
        case .stored: return weights
        case let .variant(precision): return try weights.variant(for: precision)
        case .made(.q4_1): return try WeightMatrix(try weights.fp32(), as: .q4_1, refinedScales: true, copyArena: weights.copyArena)
        case let .made(type):
            let limit = sevenBitInt8 ? int8ValueLimitWithoutVNNI : nil
            guard let columnScales else {
                return try WeightMatrix(try weights.fp32(), as: type, q8ValueLimit: limit, copyArena: weights.copyArena)
            }
            return try WeightMatrix(try EncoderCalibration.dividingColumns(try weights.fp32(), by: columnScales), as: type,
                                    q8ValueLimit: limit, scalePerRow: true, activationColumnScales: columnScales,
                                    copyArena: weights.copyArena)
        }
    }

    init(model: BertModel, key: EncoderPlanKey) throws {
        let context = model.context
        let linears = model.linears
        let sevenBitInt8 = context.isa.multipliesInt8WithoutVNNI()
        // int8: each layer's smoothing column scales per input slot (Q, K and V share theirs).
        let smoothing: [[Tensor]]? = key.precision == .int8 ? try {
            let calibration = try model.calibration()
            return try model.layers.enumerated().map { index, layer in
                try [[layer.query, layer.key, layer.value], [layer.attentionOutput], [layer.intermediate]].enumerated().map { slot, linears in
                    try calibration.columnScales(layer: index, slot: slot, weights: linears.map { try $0.weights.fp32() })
                }
            }
        }() : nil
        let made = ResultSlots<MadeWeights>(count: linears.count)
        let bound = try BoundMatmuls(linears.map(\.weights), pool: context.pool) { index, weights in
            let (role, layer) = (index % 6, index / 6)
            let columnScales = Self.rowScaledSlot[role].flatMap { smoothing?[layer][$0] }
            let source = Self.source(role: role, layer: layer, of: model.layers.count, precision: key.precision,
                                     sevenBitInt8: sevenBitInt8)
            let weights = try Self.weights(weights, role: role, layer: layer, of: model.layers.count, precision: key.precision,
                                           sevenBitInt8: sevenBitInt8, columnScales: columnScales)
            let matmul = try context.backends.bindMatmul(weights, units: key.units, pool: context.pool)
            if case .made = source { made.set(index, .success(MadeWeights(weights))) }
            return matmul
        }
        // What the bindings keep of the matrices made for this plan: their layouts, and the blocks themselves where a
        // kernel reads them in place (the binding holds the matrix; otherwise it is gone by now).
        madeWeightBytes = made.setValues.reduce(0) { $0 + $1.copyBytes + ($1.matrix?.byteCount ?? 0) }
        layers = stride(from: 0, to: bound.all.count, by: 6).map { i in
            LayerMatmuls(query: bound.all[i], key: bound.all[i + 1], value: bound.all[i + 2], attentionOutput: bound.all[i + 3],
                         intermediate: bound.all[i + 4], output: bound.all[i + 5])
        }
        let ops = try EncoderOps(registry: context.backends, units: key.units)
        self.ops = ops
        route = bound.route
        preparedBytes = bound.preparedBytes
        precision = key.precision ?? .fp32
        var steps = [ExecutionPlan.Step(ops.embedding.placement, layer: nil, role: "word_embeddings"),
                     ExecutionPlan.Step(ops.add.placement, layer: nil, role: "position_embeddings"),
                     ExecutionPlan.Step(ops.add.placement, layer: nil, role: "token_type_embeddings"),
                     ExecutionPlan.Step(ops.layerNorm.placement, layer: nil, role: "embeddings_norm")]
        for (index, layer) in bound.all.chunks(of: 6).map(Array.init).enumerated() {
            let layer = LayerMatmuls(query: layer[0], key: layer[1], value: layer[2], attentionOutput: layer[3],
                                     intermediate: layer[4], output: layer[5])
            func linear(_ matmul: BoundMatmul, _ role: String, residual: Bool = false) {
                if let _ = matmul.preparation {
                    var placement = matmul.placement
                    placement.op = .quantizeActivations
                    steps.append(ExecutionPlan.Step(placement, layer: index, role: "\(role) input"))
                }
                steps.append(ExecutionPlan.Step(matmul.placement, layer: index, role: role))
                steps.append(ExecutionPlan.Step(ops.add.placement, layer: index, role: "\(role).bias"))
                if residual { steps.append(ExecutionPlan.Step(ops.add.placement, layer: index, role: "\(role) residual")) }
            }
            linear(layer.query, "attn_q")
            linear(layer.key, "attn_k")
            linear(layer.value, "attn_v")
            steps.append(ExecutionPlan.Step(ops.attention.placement, layer: index, role: "attn"))
            linear(layer.attentionOutput, "attn_output", residual: true)
            steps.append(ExecutionPlan.Step(ops.layerNorm.placement, layer: index, role: "attn_output_norm"))
            linear(layer.intermediate, "ffn_up")
            steps.append(ExecutionPlan.Step(ops.gelu.placement, layer: index, role: "ffn_gelu"))
            linear(layer.output, "ffn_down", residual: true)
            steps.append(ExecutionPlan.Step(ops.layerNorm.placement, layer: index, role: "ffn_output_norm"))
        }
        report = ExecutionPlan(units: key.units, precision: key.precision, route: route, steps: steps,
                               joulesPerToken: bound.joulesPerToken(context))
    }
}

/// A weight matrix made for one plan, as its binding left it: the copy made from it, and the matrix while something
/// still holds it.
private final class MadeWeights: @unchecked Sendable {
    weak var matrix: WeightMatrix?
    let copyBytes: Int

    init(_ matrix: WeightMatrix) {
        self.matrix = matrix
        copyBytes = matrix.heldCopyBytes
    }
}

/// Buffers for encoding up to `rows` tokens (all sentences of a batch, back to back).
final class EncoderWorkspace {
    let rows: Int
    let threads: Int
    let preparedBytes: Int
    let x, q, k, v, attention, projected, hidden: UnsafeMutablePointer<Float>
    let stages: StageBuffers
    /// Where the threads of a pass that share every stage deal out its matmuls' columns (nil for one thread).
    let workRanges: WorkRanges?
    private let arena: BufferArena
    /// Bytes of all its buffers.
    var byteCount: Int { arena.byteCount + stages.byteCount }

    /// Bytes a workspace for `rows` tokens on `threads` threads takes (its preparations at most Ember's Q8 blocks).
    static func byteCount(config: BertModel.Config, rows: Int, threads: Int) -> Int {
        let (d, ff) = (config.hidden, config.intermediate)
        return max(1, rows) * (6 * d + ff) * 4 + StageBuffers.byteCount(rows: rows, width: max(d, ff), threads: threads)
    }

    init(config: BertModel.Config, rows: Int, threads: Int, preparedBytes: (Int, Int) -> Int) {
        self.rows = rows
        self.threads = threads
        workRanges = threads > 1 ? WorkRanges(sites: config.layers * EncoderPass.sitesPerLayer, threads: threads) : nil
        let arena = BufferArena()
        let floats = arena.floats
        let (d, ff) = (config.hidden, config.intermediate)
        x = floats(rows * d); q = floats(rows * d); k = floats(rows * d); v = floats(rows * d)
        attention = floats(rows * d); projected = floats(rows * d); hidden = floats(rows * ff)
        stages = StageBuffers(rows: rows, width: max(d, ff), threads: threads, preparedBytes: preparedBytes)
        self.preparedBytes = stages.preparedBytes
        self.arena = arena
    }
}

extension BertModel {
    @discardableResult
    func prepare(_ options: ExecutionOptions) throws -> ExecutionPlan { try plan(options) }

    func plan(_ options: ExecutionOptions) throws -> ExecutionPlan { try boundPlan(options).report }

    func boundPlan(_ options: ExecutionOptions) throws -> EncoderPlan {
        let generation = context.backends.generation
        let key = EncoderPlanKey(units: options.units, precision: options.precision, generation: generation)
        return try plans.plan(for: key, stale: { $0.generation != generation }) { try EncoderPlan(model: self, key: key) }
    }

    /// Bytes of the weight copies the model holds now: what was made from its matrices and kept with them (variants,
    /// kernel layouts) and the matrices its bound plans made for themselves, with their layouts.
    var heldWeightCopyBytes: Int {
        let stored = linears.reduce(0) { $0 + $1.weights.heldCopyBytes }
        return plans.all.reduce(stored) { $0 + $1.madeWeightBytes }
    }

    /// Bytes binding the weights for `options` adds to ``heldWeightCopyBytes`` (0 once its plan is bound), from the
    /// rule the plan binds with (``EncoderPlan/source(role:layer:of:precision:sevenBitInt8:)``).
    func weightCopyBytes(for options: ExecutionOptions) -> Int {
        let generation = context.backends.generation
        let key = EncoderPlanKey(units: options.units, precision: options.precision, generation: generation)
        guard plans.cached(key) == nil else { return 0 }
        let sevenBitInt8 = context.isa.multipliesInt8WithoutVNNI()
        var placements = WeightCopyPlacements(registry: context.backends, units: options.units)
        return linears.enumerated().reduce(0) { total, item in
            let (role, layer, weights) = (item.offset % 6, item.offset / 6, item.element.weights)
            switch EncoderPlan.source(role: role, layer: layer, of: self.layers.count, precision: options.precision,
                                      sevenBitInt8: sevenBitInt8) {
            case .stored: return total + weights.bytesToBind(at: nil, placements: &placements)
            case let .variant(precision): return total + weights.bytesToBind(at: precision, placements: &placements)
            case let .made(type): // from the fp32 weights, stored as fp32: nothing copied for that
                return total + WeightMatrix.bytesToMake(type, rows: weights.rows, columns: weights.columns, placements: &placements)
            }
        }
    }

    /// Bytes of the buffers a batch of `tokens` tokens is encoded in (a pass's activations and prepared inputs, on
    /// every thread; a batch longer than ``tokensPerPass`` runs in passes of that many).
    func passBytes(tokens: Int) -> Int {
        EncoderWorkspace.byteCount(config: config, rows: min(max(1, tokens), max(Self.tokensPerPass, config.maxSequenceLength)),
                                   threads: context.maximumThreads)
    }

    /// The largest workspace kept between batches (MiniLM: about 1,400 tokens). A whole pass of ``tokensPerPass``
    /// takes 91 MB, which a device should not hold after a bulk job; it is mapped again for each batch that long, and
    /// its pages faulted in cost such a batch about 6 % (MiniLM int8, 256 sentences a call, two threads, three
    /// alternating runs on an Intel Xeon: 761–770 sentences/s against 766–837 with the workspace kept).
    static let keptWorkspaceBytes = 32 << 20

    /// Tokens one encoder pass takes at most: a batch of any size runs in slices of sentences up to this many
    /// tokens, so its working memory is bounded (MiniLM: about 22 MB per thousand tokens, 91 MB a whole pass).
    static let tokensPerPass = 4096

    /// Embeds `texts`: tokenized (truncated to the model's maximum), encoded
    /// back to back without padding in passes of at most ``tokensPerPass``
    /// tokens, mean-pooled and L2-normalised. Each embedding has
    /// `config.hidden` values; one that is not finite is an error, never a result.
    func embed(_ texts: [String], options: ExecutionOptions) throws -> EmbeddingBatch {
        let tokenizeStart = DispatchTime.now().uptimeNanoseconds
        let ids = texts.map { tokenizer.encode($0) }
        let tokenizeSeconds = Double(DispatchTime.now().uptimeNanoseconds - tokenizeStart) / 1e9
        guard !texts.isEmpty else {
            return EmbeddingBatch(embeddings: [], tokenIDs: [], tokenizeSeconds: 0, encodeSeconds: 0,
                                  energy: EnergyEstimate(joules: 0, source: .modelled))
        }
        let start = DispatchTime.now().uptimeNanoseconds
        var embeddings: [[Float]] = [], joules = 0.0, source = EnergyEstimate.Source.modelled
        var first = 0
        while first < ids.count {
            var end = first, tokens = 0
            while end < ids.count, end == first || tokens + ids[end].count <= Self.tokensPerPass {
                tokens += ids[end].count
                end += 1
            }
            let (slice, energy) = try encode(Array(ids[first..<end]), options: options)
            if let bad = slice.firstIndex(where: { !$0.allSatisfy(\.isFinite) }) {
                throw KernelError.rejected(kernel: "encoder", argument: "texts[\(first + bad)]",
                                           status: "its embedding has NaN or infinite values (the weights or a backend are broken)")
            }
            embeddings += slice
            joules += energy.joules
            source = energy.source
            first = end
        }
        // A workspace a long batch grew goes back with it: the scheduler counts a run's buffers while it runs
        // (``passBytes(tokens:)``), not after; a batch of 32 sentences keeps its ~14 MB for the next.
        lock.withLock { if let kept = workspace, kept.byteCount > Self.keptWorkspaceBytes { workspace = nil } }
        let energy = EnergyEstimate(joules: joules, source: source)
        return EmbeddingBatch(embeddings: embeddings, tokenIDs: ids, tokenizeSeconds: tokenizeSeconds,
                              encodeSeconds: Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9, energy: energy)
    }

    /// Embeddings of already tokenized sentences (each [CLS] … [SEP], ids below the vocabulary size).
    func encode(_ sentences: [[Int]], options: ExecutionOptions) throws -> ([[Float]], EnergyEstimate) {
        for (index, ids) in sentences.enumerated() {
            guard (1...config.maxSequenceLength).contains(ids.count) else {
                throw KernelError.invalidArgument(argument: "sentences[\(index)]", found: "\(ids.count) tokens",
                                                  expected: "1 to \(config.maxSequenceLength)")
            }
            if let bad = ids.first(where: { !(0..<config.vocabulary).contains($0) }) {
                throw KernelError.invalidArgument(argument: "sentences[\(index)]", found: "token \(bad)", expected: "0..<\(config.vocabulary)")
            }
        }
        let plan = try boundPlan(options)
        let threads = max(1, min(options.threads, context.maximumThreads))
        let qos = options.qos.resolved
        let rows = sentences.reduce(0) { $0 + $1.count }
        var starts: [Int] = []
        var offset = 0
        for ids in sentences {
            starts.append(offset)
            offset += ids.count
        }
        let width = max(config.hidden, config.intermediate)
        let (needed, neededPerRow) = (plan.preparedBytes(rows, width), plan.preparedBytes(1, width))
        return try lock.withLock {
            // (per row too: threads that own their sentences keep them at a row's worth of bytes per row)
            if workspace.map({ $0.rows < rows || $0.threads < threads || $0.preparedBytes < needed
                               || $0.stages.sharedRowBytes < neededPerRow }) ?? true {
                workspace = EncoderWorkspace(config: config, rows: rows, threads: threads, preparedBytes: plan.preparedBytes)
            }
            let pass = EncoderPass(model: self, plan: plan, workspace: workspace!, sentences: sentences, starts: starts,
                                   threads: threads)
            let meter = context.energyMeter()
            try context.routes.run(on: plan.route, qos: qos) {
                context.pool.region(threads: threads, qos: qos) { pass.run(on: $0) }
            }
            if let failure = pass.stages.failure.error { throw failure }
            let energy = meter.finish(modelledJoules: plan.report.joulesPerToken * Double(rows))
            return (pool(sentences, starts: starts), energy)
        }
    }

    /// Mean over each sentence's rows of the last hidden states, L2-normalised.
    private func pool(_ sentences: [[Int]], starts: [Int]) -> [[Float]] {
        let d = config.hidden
        let x = workspace!.x
        return sentences.indices.map { index in
            var sum = [Double](repeating: 0, count: d)
            for row in starts[index]..<(starts[index] + sentences[index].count) {
                for i in 0..<d { sum[i] += Double(x[row * d + i]) }
            }
            let count = Double(sentences[index].count)
            var mean = sum.map { $0 / count }
            if normalizes {
                let norm = max(mean.reduce(0) { $0 + $1 * $1 }.squareRoot(), 1e-12)
                mean = mean.map { $0 / norm }
            }
            return mean.map(Float.init)
        }
    }
}

/// One encoder pass as every thread of its region runs it.
final class EncoderPass: @unchecked Sendable {
    let model: BertModel
    let plan: EncoderPlan
    let ws: EncoderWorkspace
    let sentences: [[Int]]
    let starts: [Int]
    /// For every row: its sentence.
    let sentenceOfRow: [Int]
    let rows: Int
    let stages: PassStages
    /// Sees the inputs of each layer's row-scaled int8 matmuls (slot 0 the Q/K/V input, 1 the attention output, 2 the
    /// feed-forward input) once written, rows × width values; for calibration, on a one-thread pass.
    var observer: ((_ layer: Int, _ slot: Int, _ values: UnsafePointer<Float>, _ rows: Int, _ width: Int) -> Void)?

    /// Where this pass's threads deal out each matmul's columns: nil for the even split (one thread, threads that own
    /// their sentences, or more rows than ``epilogueRows``).
    private let sites: LayerStealSites?
    /// Sites per layer: Q, K, V, the output projection, the feed-forward's intermediate and output.
    static let sitesPerLayer = 6

    /// A pass for a region of `threads` threads (a region that ends up with another count splits evenly).
    init(model: BertModel, plan: EncoderPlan, workspace: EncoderWorkspace, sentences: [[Int]], starts: [Int], threads: Int = 1) {
        self.model = model
        self.plan = plan
        ws = workspace
        self.sentences = sentences
        self.starts = starts
        sentenceOfRow = sentences.indices.flatMap { Array(repeating: $0, count: sentences[$0].count) }
        rows = sentenceOfRow.count
        stages = PassStages(buffers: workspace.stages, failure: PassFailure())
        // One short sentence (the latency case): both threads share every stage, and a thread the machine slows
        // leaves the other waiting at each of a layer's barriers — the faster one takes over its last columns. More
        // rows keep the even split, their products' epilogues run a few rows at a time (``linear``).
        let shared = threads > 1 && rows <= Self.epilogueRows
            && Self.sentenceGroups(sentences.map(\.count), parts: threads) == nil
        sites = shared ? workspace.workRanges.map { LayerStealSites(ranges: $0, perLayer: Self.sitesPerLayer, threads: threads) } : nil
        if let sites {
            for index in plan.layers.indices { // (no array of the matmuls: each copy retains its references)
                let layer = plan.layers[index]
                sites.reset(index, columns: layer.query.rows, layer.key.rows, layer.value.rows, layer.attentionOutput.rows,
                            layer.intermediate.rows, layer.output.rows)
            }
        }
    }

    /// The site of matmul `slot` (0 Q … 5 the feed-forward's output) of `layer`, where the threads deal it out.
    private func stealSite(_ layer: Int, _ slot: Int) -> StealSite? { sites?.site(layer, slot) }

    func run(on thread: RegionThread) {
        // A batch of many sentences: each thread runs its own sentences through every layer alone (see PassLane).
        let ownSentences = Self.sentenceGroups(sentences.map(\.count), parts: thread.count)?[thread.index]
        let lane = ownSentences.map { PassLane(owning: rowRange(of: $0), on: thread) } ?? PassLane(sharing: thread)
        let config = model.config
        let ops = plan.ops
        let (r, d, ff, heads, headDim) = (rows, config.hidden, config.intermediate, config.heads, config.headDim)
        let eps = config.layerNormEpsilon
        let scale = 1 / Float(headDim).squareRoot()
        let f32 = TensorType.f32 // read once: each `.f32` in the loops below copied the type (its name is a String)
        // Embeddings: word + position + token type 0, then LayerNorm.
        for row in lane.rows(of: r) {
            let sentence = sentenceOfRow[row]
            let (token, position) = (sentences[sentence][row - starts[sentence]], row - starts[sentence])
            let out = ws.projected + row * d
            stages.check(ops.embedding.embedding(type: f32, row: model.wordEmbeddings + token * d, columns: d, into: out), ops.embedding)
            stages.check(ops.add.add(out, model.positionEmbeddings + position * d, count: d), ops.add)
            stages.check(ops.add.add(out, model.typeEmbeddings, count: d), ops.add)
            stages.check(ops.layerNorm.layerNorm(out, gamma: model.embeddingNormGamma, beta: model.embeddingNormBeta,
                                                 into: ws.x + row * d, rows: 1, n: d, eps: eps), ops.layerNorm)
        }
        // (no barrier: the first stage ends on one; each lane wrote its rows of x, as normalize does)

        for (index, layer) in plan.layers.enumerated() {
            let weights = model.layers[index]
            // Self-attention: Q, K, V (+ bias), softmax over each sentence's own tokens.
            let input = stages.stage(lane, width: d, rows: r, group: layer.attention, source: ws.x, ownShareWritten: true)
            observe(thread, index, 0, ws.x, width: d)
            linear(lane, layer.query, weights.query, input, 0, into: ws.q, width: d, site: stealSite(index, 0))
            linear(lane, layer.key, weights.key, input, 1, into: ws.k, width: d, site: stealSite(index, 1))
            linear(lane, layer.value, weights.value, input, 2, into: ws.v, width: d, site: stealSite(index, 2))
            lane.barrier()
            // Each sentence's heads, one call each: every token of the sentence against all of its tokens (the
            // threads take the sentence × head items in turn, so each sentence's heads are shared among them; a lane
            // that owns its sentences takes all of theirs).
            let items = ownSentences.map { stride(from: $0.lowerBound * heads, to: $0.upperBound * heads, by: 1) }
                ?? stride(from: thread.index, to: sentences.count * heads, by: thread.count)
            for item in items {
                let (sentence, head) = item.quotientAndRemainder(dividingBy: heads)
                let first = starts[sentence] * d + head * headDim
                stages.check(ops.attention.sequenceAttention(cacheType: f32, queries: ws.q + first, keys: ws.k + first, values: ws.v + first,
                                                             stride: d, rows: sentences[sentence].count, headDim: headDim, scale: scale,
                                                             into: ws.attention + first), ops.attention)
            }
            lane.barrier()
            // Output projection (+ bias) + residual, LayerNorm.
            let projectionInput = stages.stage(lane, width: d, rows: r, group: layer.projection, source: ws.attention)
            observe(thread, index, 1, ws.attention, width: d)
            linear(lane, layer.attentionOutput, weights.attentionOutput, projectionInput, 0, into: ws.projected, width: d,
                   residual: ws.x, site: stealSite(index, 3))
            lane.barrier()
            normalize(lane, gamma: weights.attentionNormGamma, beta: weights.attentionNormBeta)
            // Feed-forward: intermediate (+ bias), GELU, output (+ bias) + residual, LayerNorm.
            let intermediateInput = stages.stage(lane, width: d, rows: r, group: layer.feedForward, source: ws.x,
                                                 ownShareWritten: true)
            observe(thread, index, 2, ws.x, width: d)
            linear(lane, layer.intermediate, weights.intermediate, intermediateInput, 0, into: ws.hidden, width: ff, gelu: true,
                   site: stealSite(index, 4))
            lane.barrier()
            let outputInput = stages.stage(lane, width: ff, rows: r, group: layer.downProjection, source: ws.hidden)
            linear(lane, layer.output, weights.output, outputInput, 0, into: ws.projected, width: d, residual: ws.x,
                   site: stealSite(index, 5))
            lane.barrier()
            normalize(lane, gamma: weights.outputNormGamma, beta: weights.outputNormBeta)
            if index == plan.layers.count - 1 { lane.barrier() } // no stage follows the last LayerNorm: every row is written here
        }
    }

    /// The rows of `group`'s sentences (consecutive sentences, consecutive rows).
    private func rowRange(of group: Range<Int>) -> Range<Int> {
        group.isEmpty ? 0..<0 : starts[group.lowerBound] ..< (starts[group.upperBound - 1] + sentences[group.upperBound - 1].count)
    }

    /// Largest share of a batch's tokens one thread may own, relative to an even share, for the threads to run whole
    /// sentences each: above it the busiest thread would take longer alone than the threads sharing every stage
    /// take together (MiniLM int8, batch 32, 2-core Zen 3: shared stages ran 1.35-1.44× one thread's rate).
    static let ownedRowsImbalance = 1.3

    /// Consecutive groups of sentences, one per thread, of about equal tokens — or nil where the threads had better
    /// share every stage: one thread, fewer sentences than threads, or groups too uneven (``ownedRowsImbalance``).
    static func sentenceGroups(_ lengths: [Int], parts: Int) -> [Range<Int>]? {
        guard parts > 1, lengths.count >= parts else { return nil }
        let total = lengths.reduce(0, +)
        var groups: [Range<Int>] = []
        var (first, taken) = (0, 0)
        for part in 1..<parts {
            // End this group where the running total comes nearest to `part` even shares, leaving a sentence each for
            // the groups still to come.
            let target = Double(total) * Double(part) / Double(parts)
            var end = first + 1
            var sum = taken + lengths[first]
            while end < lengths.count - (parts - part), abs(Double(sum + lengths[end]) - target) <= abs(Double(sum) - target) {
                sum += lengths[end]
                end += 1
            }
            groups.append(first..<end)
            (first, taken) = (end, sum)
        }
        groups.append(first..<lengths.count)
        let largest = groups.map { $0.reduce(0) { $0 + lengths[$1] } }.max() ?? 0
        return Double(largest) <= ownedRowsImbalance * Double(total) / Double(parts) ? groups : nil
    }

    /// Hands a matmul input to the observer (first thread only; the observed passes run one thread).
    @inline(__always)
    private func observe(_ thread: RegionThread, _ layer: Int, _ slot: Int, _ values: UnsafeMutablePointer<Float>, width: Int) {
        if let observer, thread.index == 0 { observer(layer, slot, UnsafePointer(values), rows, width) }
    }

    /// Input rows a quantized linear layer multiplies before its epilogue runs on their outputs: 64 rows of a
    /// thread's half of a 1,536-wide output are 192 KB, still in L2 when the bias, residual and GELU read them back.
    static let epilogueRows = 64

    /// This lane's part of y = x·Wᵀ + b (+ residual) (then GELU): its rows, or its share of the output columns of every
    /// row — the pieces it claims at `site` when there is one (``StealSite``). A quantized
    /// product runs ``epilogueRows`` input rows at a time, each followed by those rows' bias, residual and GELU
    /// while the outputs are in cache: after the whole product, a batch of 32 sentences' 1,536-wide hidden rows
    /// (3.7 MB) has left L2 and the epilogue re-reads them from farther away.
    private func linear(_ lane: PassLane, _ matmul: BoundMatmul, _ linear: BertModel.Linear, _ input: StageInput, _ slot: Int,
                        into y: UnsafeMutablePointer<Float>, width: Int, residual: UnsafePointer<Float>? = nil,
                        gelu: Bool = false, site: StealSite?) {
        let ops = plan.ops
        func epilogue(_ rows: Range<Int>, _ columns: Range<Int>) {
            let (first, count) = (columns.lowerBound, columns.count)
            for row in rows {
                let out = y + row * width + first
                stages.check(ops.add.add(out, linear.bias + first, count: count), ops.add)
                if let residual { stages.check(ops.add.add(out, residual + row * width + first, count: count), ops.add) }
                if gelu { stages.check(ops.gelu.gelu(out, count: count), ops.gelu) }
            }
        }
        if let site, lane.ownedRows == nil {
            stages.matmul(lane, matmul, input, slot, rows: rows, into: y, site: site) { epilogue(0..<rows, $0) }
            return
        }
        let inputRows = lane.ownedRows ?? 0..<rows
        // fp32 (BLAS) takes the rows at once: sgemm's packing per call made 64-row calls 6-10 % slower overall.
        let step = matmul.preparation == nil ? max(inputRows.count, 1) : Self.epilogueRows
        for chunk in stride(from: inputRows.lowerBound, to: inputRows.upperBound, by: step) {
            let chunkRows = chunk..<min(inputRows.upperBound, chunk + step)
            let columns = stages.matmul(lane, matmul, input, slot, inputRows: chunkRows, into: y)
            guard !columns.isEmpty else { return }
            epilogue(chunkRows, columns)
        }
    }

    /// x = LayerNorm(projected) over the lane's rows (`lane.rows(of: rows)`); no barrier — the stage that reads x next
    /// (`ownShareWritten`) ends on one, a barrier fewer per LayerNorm (two per layer of an int8 or int4 encoder).
    private func normalize(_ lane: PassLane, gamma: UnsafePointer<Float>, beta: UnsafePointer<Float>) {
        let d = model.config.hidden
        let part = lane.rows(of: rows)
        if !part.isEmpty {
            stages.check(plan.ops.layerNorm.layerNorm(ws.projected + part.lowerBound * d, gamma: gamma, beta: beta,
                                                      into: ws.x + part.lowerBound * d, rows: part.count, n: d,
                                                      eps: model.config.layerNormEpsilon), plan.ops.layerNorm)
        }
    }
}

extension Array {
    /// Consecutive slices of `size` elements (the last may be shorter).
    func chunks(of size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
