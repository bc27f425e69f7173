import CKernels
import Foundation

extension LlamaModel {
    /// Runs `tokens` from the session's position and returns the logits
    /// [tokens.count, vocabulary] with `allLogits`, else [1, vocabulary] for the last token.
    ///
    /// The whole pass is one job on the route that runs its matmuls (the
    /// neural-engine queue, a GPU command buffer, or the caller's CPU
    /// workers), executed by `threads` threads of class `qos` in step: each
    /// stage splits rows, heads or weight rows between them, with a barrier
    /// where a stage needs the previous one's whole output.
    public func forward(_ tokens: [Int], session: Session, units: ComputeUnits = .cpuAndNeuralEngine,
                        precision: Precision? = nil, allLogits: Bool = false,
                        threads: Int = KernelThreads.default, qos: QoSClass = .current) throws -> Tensor {
        let (t, d) = (tokens.count, config.hidden)
        guard t > 0, session.position + t <= session.capacity else {
            throw KernelError.invalidArgument(argument: "tokens", found: "\(t) at position \(session.position)",
                                              expected: "1 or more, with room in a \(session.capacity)-token context")
        }
        for (row, token) in tokens.enumerated() where !(0..<config.vocabulary).contains(token) {
            throw KernelError.invalidArgument(argument: "tokens[\(row)]", found: "\(token)", expected: "0..<\(config.vocabulary)")
        }
        let plan = try plan(units: units, precision: precision)
        let qos = qos.resolved
        let threads = max(1, min(threads, WorkerPool.shared.threadsPerClass))
        if session.workspace.map({ $0.rows < t || $0.threads < threads }) ?? true {
            session.workspace = Workspace(config: config, rows: t, threads: threads, capacity: session.capacity)
        }
        let workspace = session.workspace!

        // Token embedding: one dequantized row per token.
        let rowBytes = embedding.format.byteCount(rows: 1, columns: d)
        let table = embedding.bytes.baseAddress!
        for (row, token) in tokens.enumerated() {
            if let format = embedding.format.quantized {
                try KernelError.check(ek_dequantize_row(KernelISA.active.cValue, format.cValue, table + token * rowBytes,
                                                        workspace.x + row * d, Int64(d)),
                                      kernel: "ek_dequantize_row", argument: { _ in "token_embd" })
            } else {
                (workspace.x + row * d).update(from: (table + token * rowBytes).assumingMemoryBound(to: Float.self), count: d)
            }
        }
        // RoPE angles, once per position.
        let thetaScale = pow(config.ropeBase, -2 / Float(config.headDim))
        for row in 0..<t {
            ek_rope_table(workspace.rope + row * config.headDim, Int64(config.headDim / 2), Int64(session.position + row), thetaScale)
        }

        let outputRows = allLogits ? t : 1
        var logits = try Tensor(zeros: [outputRows, config.vocabulary])
        try logits.makeWritable(argument: "logits")
        let pass = ForwardPass(model: self, plan: plan, session: session, workspace: workspace, rows: t,
                               outputRows: outputRows, logits: logits.baseAddress.assumingMemoryBound(to: Float.self))
        let meter = EnergyMeter()
        try ComputeRoutes.shared.run(on: plan.route, qos: qos) {
            WorkerPool.shared.region(threads: threads, qos: qos) { pass.run(on: $0) }
        }
        if let failure = pass.failure { throw failure }
        session.advance(by: t)
        let operations = plan.operationsPerToken * Double(t) - (allLogits ? 0 : Double(t - 1) * 2 * Double(plan.output.rows * d))
        let energy = meter.finish(unit: plan.route, operations: operations, precision: plan.precision)
        session.energyTotal = session.energyTotal.map { $0 + energy } ?? energy
        return logits
    }
}

/// One forward pass as every thread of its region runs it, top to bottom.
final class ForwardPass: @unchecked Sendable {
    let model: LlamaModel
    let plan: ForwardPlan
    let session: LlamaModel.Session
    let ws: Workspace
    let rows: Int
    let outputRows: Int
    let logits: UnsafeMutablePointer<Float>
    let stages: PassStages
    var failure: KernelError? { stages.failure.error }

    init(model: LlamaModel, plan: ForwardPlan, session: LlamaModel.Session, workspace: Workspace, rows: Int,
         outputRows: Int, logits: UnsafeMutablePointer<Float>) {
        self.model = model
        self.plan = plan
        self.session = session
        ws = workspace
        self.rows = rows
        self.outputRows = outputRows
        self.logits = logits
        stages = PassStages(buffers: workspace.stages, failure: PassFailure())
    }

    func run(on thread: RegionThread) {
        let config = model.config
        let (t, d, ff) = (rows, config.hidden, config.feedForward)
        let (heads, kvHeads, headDim) = (config.heads, config.kvHeads, config.headDim)
        let kvWidth = kvHeads * headDim, group = heads / kvHeads
        let start = session.position, eps = config.rmsEpsilon
        let scale = 1 / Float(headDim).squareRoot()
        let half = session.halfPrecision
        let elementBytes = half ? 2 : 4

        for (index, layer) in plan.layers.enumerated() {
            let weights = model.layers[index]
            // Attention: RMSNorm, Q/K/V projections.
            let attentionInput = stages.stage(thread, width: d, rows: t, group: [layer.q, layer.k, layer.v], into: ws.normed) { part, out in
                ek_rms_norm(self.ws.x + part.lowerBound * d, weights.attentionNorm, out + part.lowerBound * d, Int64(part.count), Int64(d), eps)
            }
            stages.matmul(thread, layer.q, attentionInput, 0, rows: t, into: ws.q)
            stages.matmul(thread, layer.k, attentionInput, 1, rows: t, into: ws.k)
            stages.matmul(thread, layer.v, attentionInput, 2, rows: t, into: ws.v)
            thread.barrier()

            // RoPE on Q and K; K and V into the cache.
            let keys = session.keys(index), values = session.values(index)
            for row in thread.share(of: t) {
                let angles = ws.rope + row * headDim
                ek_rope_apply(ws.q + row * d, Int64(heads), Int64(headDim), angles)
                ek_rope_apply(ws.k + row * kvWidth, Int64(kvHeads), Int64(headDim), angles)
                let slot = (start + row) * kvWidth * elementBytes
                if half {
                    ek_fp32_to_fp16_row(ws.k + row * kvWidth, (keys + slot).assumingMemoryBound(to: UInt16.self), Int64(kvWidth))
                    ek_fp32_to_fp16_row(ws.v + row * kvWidth, (values + slot).assumingMemoryBound(to: UInt16.self), Int64(kvWidth))
                } else {
                    (keys + slot).copyMemory(from: ws.k + row * kvWidth, byteCount: kvWidth * 4)
                    (values + slot).copyMemory(from: ws.v + row * kvWidth, byteCount: kvWidth * 4)
                }
            }
            thread.barrier()

            // Causal attention, (row, head) pairs dealt round-robin (later rows see more positions).
            let scores = ws.scores[thread.index]
            for item in stride(from: thread.index, to: t * heads, by: thread.count) {
                let (row, head) = item.quotientAndRemainder(dividingBy: heads)
                let kvOffset = (head / group) * headDim * elementBytes
                let (query, out) = (ws.q + row * d + head * headDim, ws.attention + row * d + head * headDim)
                let visible = Int64(start + row + 1)
                if half {
                    ek_attention_head_f16(query, (keys + kvOffset).assumingMemoryBound(to: UInt16.self),
                                          (values + kvOffset).assumingMemoryBound(to: UInt16.self), Int64(kvWidth), visible,
                                          Int64(headDim), scale, scores, out)
                } else {
                    ek_attention_head_f32(query, (keys + kvOffset).assumingMemoryBound(to: Float.self),
                                          (values + kvOffset).assumingMemoryBound(to: Float.self), Int64(kvWidth), visible,
                                          Int64(headDim), scale, scores, out)
                }
            }
            thread.barrier()

            // Output projection, added to the residual stream.
            let projectionInput = stages.stage(thread, width: d, rows: t, group: [layer.o], source: ws.attention)
            stages.addResidual(ws.projected, to: ws.x, width: d, rows: t,
                       columns: stages.matmul(thread, layer.o, projectionInput, 0, rows: t, into: ws.projected))
            thread.barrier()

            // Feed-forward: RMSNorm, gate and up, SwiGLU, down, added to the residual stream.
            let feedForwardInput = stages.stage(thread, width: d, rows: t, group: [layer.gate, layer.up], into: ws.normed) { part, out in
                ek_rms_norm(self.ws.x + part.lowerBound * d, weights.feedForwardNorm, out + part.lowerBound * d, Int64(part.count), Int64(d), eps)
            }
            stages.matmul(thread, layer.gate, feedForwardInput, 0, rows: t, into: ws.gate)
            stages.matmul(thread, layer.up, feedForwardInput, 1, rows: t, into: ws.up)
            thread.barrier()
            let elements = thread.share(of: t * ff, alignment: 32)
            ek_swiglu(ws.gate + elements.lowerBound, ws.up + elements.lowerBound, ws.hidden + elements.lowerBound, Int64(elements.count))
            thread.barrier()
            let downInput = stages.stage(thread, width: ff, rows: t, group: [layer.down], source: ws.hidden)
            stages.addResidual(ws.projected, to: ws.x, width: d, rows: t,
                       columns: stages.matmul(thread, layer.down, downInput, 0, rows: t, into: ws.projected))
            thread.barrier()
        }

        // Final RMSNorm and the tied output projection, for the rows asked for.
        let first = t - outputRows
        let outputInput = stages.stage(thread, width: d, rows: outputRows, group: [plan.output], into: ws.normed) { part, out in
            ek_rms_norm(self.ws.x + (first + part.lowerBound) * d, self.model.outputNorm, out + part.lowerBound * d,
                        Int64(part.count), Int64(d), eps)
        }
        stages.matmul(thread, plan.output, outputInput, 0, rows: outputRows, into: logits)
    }

}
