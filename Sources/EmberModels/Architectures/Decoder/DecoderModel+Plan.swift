import EmberCore
import Foundation

/// The ops of a decoder's forward pass other than its matmuls, each bound to
/// the backend the registry placed it on (with the scalar reference as the
/// fallback). A class: the pass's closures capture it by reference.
final class DecoderOps {
    let embedding, norm, rope, attention, add: BoundOp
    /// The feed-forward's gated activation: SwiGLU or GeGLU, as the description says.
    let gatedActivation: BoundOp
    /// The RMSNorm of each query and key head, only when the description has a query/key norm.
    let queryKeyNorm: BoundOp?

    init(model: DecoderModel, units: ComputeUnits, cacheType: TensorType) throws {
        let registry = model.context.backends
        embedding = try registry.bind(.embedding, type: model.embedding.type, units: units)
        norm = try registry.bind(.rmsNorm, type: .f32, units: units)
        rope = try registry.bind(.rope, type: .f32, units: units)
        attention = try registry.bind(.attention, type: cacheType, units: units)
        gatedActivation = try registry.bind(model.description.feedForward == .geglu ? .geglu : .swiglu, type: .f32, units: units)
        add = try registry.bind(.add, type: .f32, units: units)
        queryKeyNorm = model.description.queryKeyNorm ? norm : nil
    }
}

/// Which bound plan a forward pass uses: the units, the precision asked for, the KV cache's type, and the backends'
/// generation (a backend registered or disabled since makes a new plan).
struct DecoderPlanKey: Hashable {
    let units: ComputeUnits
    let precision: Precision?
    let cacheType: TensorType
    let generation: Int
}

/// Every op of the model bound to the backend the registry picks for the
/// units and precision asked for (weight variants derived once and cached by
/// the weights), and the route the forward pass holds while it runs.
final class DecoderPlan: @unchecked Sendable {
    /// A layer's matmuls and the stages that feed them (a class: a decode step reads it without copying seven
    /// matmuls).
    final class LayerMatmuls {
        let q, k, v, o, gate, up, down: BoundMatmul
        /// Q, K and V; O; gate and up; down.
        let attention, projection, feedForward, downProjection: StageGroup

        init(q: BoundMatmul, k: BoundMatmul, v: BoundMatmul, o: BoundMatmul, gate: BoundMatmul, up: BoundMatmul,
             down: BoundMatmul) {
            (self.q, self.k, self.v, self.o, self.gate, self.up, self.down) = (q, k, v, o, gate, up, down)
            attention = StageGroup([q, k, v])
            projection = StageGroup([o])
            feedForward = StageGroup([gate, up])
            downProjection = StageGroup([down])
        }
    }

    let layers: [LayerMatmuls]
    let output: BoundMatmul
    /// The output projection's stage.
    let outputStage: StageGroup
    let ops: DecoderOps
    /// The unit that runs most of the arithmetic; the pass runs on its execution resource.
    let route: ComputeUnit
    /// The precision of the weights the matmuls read (the file's own when none was asked for).
    let precision: Precision
    /// Multiply-adds ×2 of the matmuls, per token.
    let operationsPerToken: Double
    /// The most bytes a matmul's activation preparation needs for (rows, width).
    let preparedBytes: @Sendable (Int, Int) -> Int
    /// Where every op of one pass runs (for `ember plan`).
    let report: ExecutionPlan
    /// Modelled joules of the output projection for one row (left out for rows whose logits are not asked for).
    let outputJoulesPerRow: Double

    init(model: DecoderModel, key: DecoderPlanKey) throws {
        let context = model.context
        let bindings = model.matmulPrecisions(key.precision)
        let bound = try BoundMatmuls(bindings.map(\.weights), pool: context.pool) { index, w in
            let weights = try bindings[index].precision.map { try w.variant(for: $0) } ?? w
            return try context.backends.bindMatmul(weights, units: key.units, pool: context.pool)
        }
        layers = stride(from: 0, to: bound.all.count - 1, by: 7).map { i in
            LayerMatmuls(q: bound.all[i], k: bound.all[i + 1], v: bound.all[i + 2], o: bound.all[i + 3],
                         gate: bound.all[i + 4], up: bound.all[i + 5], down: bound.all[i + 6])
        }
        output = bound.all[bound.all.count - 1]
        outputStage = StageGroup([output])
        ops = try DecoderOps(model: model, units: key.units, cacheType: key.cacheType)
        route = bound.route
        operationsPerToken = bound.operationsPerToken
        preparedBytes = bound.preparedBytes
        precision = key.precision ?? model.filePrecision
        outputJoulesPerRow = context.cost(OpSupport(.matmul, output.placement.type), on: output.placement.backend)
            .estimate(work: 2 * Double(output.rows * output.columns)).joules
        report = Self.report(model: model, key: key, layers: layers, output: output, ops: ops, route: route,
                             joulesPerToken: bound.joulesPerToken(context) + Self.vectorJoulesPerToken(model: model, ops: ops))
    }

    /// Every op of one pass in order, as placed.
    private static func report(model: DecoderModel, key: DecoderPlanKey, layers: [LayerMatmuls], output: BoundMatmul, ops: DecoderOps,
                               route: ComputeUnit, joulesPerToken: Double) -> ExecutionPlan {
        var steps: [ExecutionPlan.Step] = [ExecutionPlan.Step(ops.embedding.placement, layer: nil, role: "token_embd")]
        func matmuls(_ group: [(BoundMatmul, String)], layer: Int?) {
            if let first = group.first?.0, first.preparation != nil {
                var placement = first.placement
                placement.op = .quantizeActivations
                steps.append(ExecutionPlan.Step(placement, layer: layer, role: group.map(\.1).joined(separator: "+") + " input"))
            }
            steps += group.map { ExecutionPlan.Step($0.0.placement, layer: layer, role: $0.1) }
        }
        let description = model.description
        for (index, layer) in layers.enumerated() {
            steps.append(ExecutionPlan.Step(ops.norm.placement, layer: index, role: "attn_norm"))
            matmuls([(layer.q, "attn_q"), (layer.k, "attn_k"), (layer.v, "attn_v")], layer: index)
            if model.layers[index].qBias != nil {
                steps += ["attn_q.bias", "attn_k.bias", "attn_v.bias"].map { ExecutionPlan.Step(ops.add.placement, layer: index, role: $0) }
            }
            if let norm = ops.queryKeyNorm {
                steps += ["attn_q_norm", "attn_k_norm"].map { ExecutionPlan.Step(norm.placement, layer: index, role: $0) }
            }
            let sliding = model.config.slidingLayers[index]
            steps.append(ExecutionPlan.Step(ops.rope.placement, layer: index, role: "rope_\(description.rotaryLayout.rawValue)\(sliding ? "_sliding" : "")"))
            steps.append(ExecutionPlan.Step(ops.attention.placement, layer: index,
                                            role: sliding ? "attention (window \(model.config.slidingWindow ?? 0))" : "attention"))
            matmuls([(layer.o, "attn_output")], layer: index)
            if model.layers[index].postAttentionNorm != nil {
                steps.append(ExecutionPlan.Step(ops.norm.placement, layer: index, role: "post_attention_norm"))
            }
            steps.append(ExecutionPlan.Step(ops.add.placement, layer: index, role: "attn_residual"))
            steps.append(ExecutionPlan.Step(ops.norm.placement, layer: index, role: "ffn_norm"))
            matmuls([(layer.gate, "ffn_gate"), (layer.up, "ffn_up")], layer: index)
            steps.append(ExecutionPlan.Step(ops.gatedActivation.placement, layer: index, role: "ffn_\(description.feedForward.rawValue)"))
            matmuls([(layer.down, "ffn_down")], layer: index)
            if model.layers[index].postFeedForwardNorm != nil {
                steps.append(ExecutionPlan.Step(ops.norm.placement, layer: index, role: "post_ffw_norm"))
            }
            steps.append(ExecutionPlan.Step(ops.add.placement, layer: index, role: "ffn_residual"))
        }
        steps.append(ExecutionPlan.Step(ops.norm.placement, layer: nil, role: "output_norm"))
        matmuls([(output, model.output === model.embedding ? "output (tied to token_embd)" : "output")], layer: nil)
        return ExecutionPlan(units: key.units, precision: key.precision, route: route, steps: steps, joulesPerToken: joulesPerToken)
    }

    /// Modelled joules of the non-matmul ops for one token, from the context's costs (a small share of a pass).
    private static func vectorJoulesPerToken(model: DecoderModel, ops: DecoderOps) -> Double {
        let c = model.config
        func joules(_ op: BoundOp, _ elements: Double) -> Double {
            model.context.cost(OpSupport(op.placement.op, op.placement.type), on: op.placement.backend).estimate(work: elements).joules
        }
        let perLayer = 2 * joules(ops.norm, Double(c.hidden)) + joules(ops.rope, Double((c.heads + c.kvHeads) * c.headDim))
            + joules(ops.gatedActivation, Double(c.feedForward)) + 2 * joules(ops.add, Double(c.hidden))
        return Double(c.layers) * perLayer + joules(ops.norm, Double(c.hidden)) + joules(ops.embedding, Double(c.hidden))
    }
}

extension DecoderModel {
    /// A pass's matmul weights in the order they are bound (every layer's, then the output projection), each with the
    /// precision it runs at when `precision` is asked for (nil: as stored). The output projection (the token table
    /// when tied) keeps a finer quantized format (Q8_0 in SmolLM2's file) unless fp32 is asked for, as llama.cpp runs
    /// its Q4_1 file; at int4 a 4-bit mix's layers keep theirs too.
    func matmulPrecisions(_ precision: Precision?) -> [(weights: WeightMatrix, precision: Precision?)] {
        let matrices = layerMatrices + [output]
        let keepsMix = precision == .int4 && int4KeepsStoredTypes
        return matrices.enumerated().map { index, w in
            guard let precision else { return (w, nil) }
            let keepsFinerFormat = (keepsMix || index == matrices.count - 1) && w.type != .f32 && precision != .fp32
                && (w.type.precision ?? .fp32) > precision
            return (w, keepsFinerFormat ? nil : precision)
        }
    }

    /// Bytes binding the weights for `options` adds to ``heldWeightCopyBytes``: each matrix's variant at the
    /// precision asked for when it is not made yet, and the copy the backend placed for it keeps (0 once bound).
    func weightCopyBytes(for options: ExecutionOptions) -> Int {
        var placements = WeightCopyPlacements(registry: context.backends, units: options.units)
        return matmulPrecisions(options.precision).reduce(0) { total, matrix in
            total + matrix.weights.bytesToBind(at: matrix.precision, placements: &placements)
        }
    }

    /// Bytes of the weight copies the model holds now (``WeightMatrix/heldCopyBytes`` of every matrix, the token table once).
    var heldWeightCopyBytes: Int {
        let matrices = (output === embedding ? [embedding] : [embedding, output]) + layerMatrices
        return matrices.reduce(0) { $0 + $1.heldCopyBytes }
    }

    /// The bound plan for `options` and the cache type, built on first use and cached.
    func boundPlan(_ options: ExecutionOptions, cacheType: TensorType) throws -> DecoderPlan {
        let generation = context.backends.generation
        let key = DecoderPlanKey(units: options.units, precision: options.precision, cacheType: cacheType, generation: generation)
        return try plans.plan(for: key, stale: { $0.generation != generation }) { try DecoderPlan(model: self, key: key) }
    }

    func plan(_ options: ExecutionOptions) throws -> ExecutionPlan { try boundPlan(options, cacheType: .f16).report }

    @discardableResult
    func prepare(_ options: ExecutionOptions) throws -> ExecutionPlan { try plan(options) }
}
