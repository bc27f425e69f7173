import Foundation

/// Every matmul of the model bound to the kernel the registry picks for the
/// units and precision asked for (variants derived once and cached by the
/// weights), and the route the forward pass holds while it runs.
final class ForwardPlan: @unchecked Sendable {
    struct LayerMatmuls {
        let q, k, v, o, gate, up, down: BoundMatmul
    }

    let layers: [LayerMatmuls]
    let output: BoundMatmul
    /// The unit that runs most of the arithmetic; the pass runs on its execution resource.
    let route: ComputeUnit
    /// The precision of the weights the matmuls read (the file's own when none was asked for).
    let precision: Precision
    /// Multiply-adds ×2 of the matmuls, per token.
    let operationsPerToken: Double

    init(model: LlamaModel, key: PlanKey, registry: KernelRegistry) throws {
        func bind(_ w: WeightMatrix, keepingFinerFormat: Bool) throws -> BoundMatmul {
            guard let precision = key.precision,
                  !(keepingFinerFormat && w.format != .f32 && precision != .fp32 && w.format.precision > precision) else {
                return try registry.bindMatmul(w, units: key.units)
            }
            return try registry.bindMatmul(try w.variant(for: precision), units: key.units)
        }
        // The token table (also the output projection) keeps a finer quantized format
        // (Q8_0 in SmolLM2's file) unless fp32 is asked for, as llama.cpp runs its Q4_1 file.
        let matrices = model.layers.flatMap { [$0.q, $0.k, $0.v, $0.o, $0.gate, $0.up, $0.down] } + [model.embedding]
        let bound = try BoundMatmuls(matrices) { index, w in
            try bind(w, keepingFinerFormat: index == matrices.count - 1)
        }
        layers = stride(from: 0, to: bound.all.count - 1, by: 7).map { i in
            LayerMatmuls(q: bound.all[i], k: bound.all[i + 1], v: bound.all[i + 2], o: bound.all[i + 3],
                         gate: bound.all[i + 4], up: bound.all[i + 5], down: bound.all[i + 6])
        }
        output = bound.all[bound.all.count - 1]
        route = bound.route
        operationsPerToken = bound.operationsPerToken
        precision = key.precision ?? model.layers.first?.q.format.precision ?? .fp32
    }
}

extension LlamaModel {
    /// The bound plan for `units` and `precision`, built on first use and cached.
    func plan(units: ComputeUnits, precision: Precision?) throws -> ForwardPlan {
        let key = PlanKey(units: units, precision: precision)
        return try plans.plan(for: key) { try ForwardPlan(model: self, key: key, registry: .shared) }
    }

    /// Where each op of one decoder layer and the output projection runs
    /// under `units`, like Core ML's `MLComputePlan`: matmuls as the kernel
    /// registry places them, the other ops on the CPU route in the model's code.
    public func computePlan(units: ComputeUnits, precision: Precision? = nil) throws -> ComputePlan {
        let plan = try plan(units: units, precision: precision)
        let layer = plan.layers.first.map { [$0.q, $0.k, $0.v, $0.o, $0.gate, $0.up, $0.down].map(\.placement) } ?? []
        func cpu(_ op: ComputeOperation, _ reason: String) -> Placement {
            Placement(op: op, format: .f32, unit: .cpu, kernel: nil, source: nil, reason: reason)
        }
        let modelCode = "fp32 vector op in the model's code (CKernels ek_ops) on the CPU route"
        let norm = cpu(.rmsNorm, modelCode)
        var placements: [Placement] = [cpu(.embedding, "one dequantized row per token"), norm]
        placements += layer[0..<3]
        placements += [cpu(.rope, modelCode), cpu(.attention, modelCode), layer[3], norm, layer[4], layer[5]]
        placements += [cpu(.activation, "SwiGLU, " + modelCode), layer[6], norm, plan.output.placement]
        return ComputePlan(units: units, placements: placements)
    }
}
