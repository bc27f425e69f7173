import _CEmberKernels
import EmberCore
import Foundation

extension DecoderModel {
    /// Runs `tokens` from the session's position and returns the logits
    /// [tokens.count, vocabulary] with `allLogits`, else [1, vocabulary] for the last token.
    ///
    /// The whole pass is one job on the route that runs its matmuls (the
    /// neural-engine queue, the GPU submission queue, or the caller's CPU
    /// workers), executed by the options' threads of its QoS class in step:
    /// each stage splits rows, heads or weight rows between them, with a
    /// barrier where a stage needs the previous one's whole output. Each op
    /// calls the backend it was placed on.
    func forward(_ tokens: [Int], session generic: any GenerationSession, options: ExecutionOptions, allLogits: Bool) throws -> Tensor {
        guard let session = generic as? DecoderSession else {
            throw KernelError.invalidArgument(argument: "session", found: "\(type(of: generic))", expected: "a session this model made")
        }
        let (t, d) = (tokens.count, config.hidden)
        guard t > 0, session.position + t <= session.capacity else {
            throw KernelError.invalidArgument(argument: "tokens", found: "\(t) at position \(session.position)",
                                              expected: "1 or more, with room in a \(session.capacity)-token context")
        }
        for (row, token) in tokens.enumerated() where !(0..<config.vocabulary).contains(token) {
            throw KernelError.invalidArgument(argument: "tokens[\(row)]", found: "\(token)", expected: "0..<\(config.vocabulary)")
        }
        let plan = try boundPlan(options, cacheType: session.cacheType)
        let qos = options.qos.resolved
        let threads = max(1, min(options.threads, context.maximumThreads))
        let needed = plan.preparedBytes(t, max(d, config.feedForward))
        if session.workspace.map({ $0.rows < t || $0.threads < threads || $0.preparedBytes < needed }) ?? true {
            session.workspace = DecoderWorkspace(config: config, rows: t, threads: threads, capacity: session.capacity,
                                                 preparedBytes: plan.preparedBytes)
        }
        let workspace = session.workspace!

        // RoPE angles, once per position.
        let thetaScale = pow(config.ropeBase, -2 / Float(config.headDim))
        for row in 0..<t {
            ek_rope_table(workspace.rope + row * config.headDim, Int64(config.headDim / 2), Int64(session.position + row), thetaScale)
        }

        // Token embedding, before the region (a row per token is too little work to split): one table row per
        // token, scaled when the description says so.
        let table = embedding.bytes.baseAddress!, rowBytes = embedding.rowBytes
        for (row, token) in tokens.enumerated() {
            let status = plan.ops.embedding.embedding(type: embedding.type, row: table + token * rowBytes, columns: d,
                                                      into: workspace.x + row * d)
            guard status == 0 else {
                throw KernelError.rejected(kernel: plan.ops.embedding.placement.backend, argument: "embedding", status: "status \(status)")
            }
            if embeddingScale != 1 {
                for i in 0..<d { workspace.x[row * d + i] *= embeddingScale }
            }
        }

        let outputRows = allLogits ? t : 1
        var logits = try Tensor(zeros: [outputRows, config.vocabulary])
        try logits.makeWritable(argument: "logits")
        let pass = DecoderPass(model: self, plan: plan, session: session, workspace: workspace, tokens: tokens,
                               outputRows: outputRows, logits: logits.baseAddress.assumingMemoryBound(to: Float.self))
        let meter = context.energyMeter()
        try context.routes.run(on: plan.route, qos: qos) {
            context.pool.region(threads: threads, qos: qos) { pass.run(on: $0) }
        }
        if let failure = pass.failure { throw failure }
        session.advance(by: t)
        let energy = meter.finish(modelledJoules: plan.report.joulesPerToken * Double(t) - Double(t - outputRows) * plan.outputJoulesPerRow)
        session.energyTotal = session.energyTotal.map { $0 + energy } ?? energy
        return logits
    }
}

/// One forward pass as every thread of its region runs it, top to bottom.
final class DecoderPass: @unchecked Sendable {
    let model: DecoderModel
    let plan: DecoderPlan
    let session: DecoderSession
    let ws: DecoderWorkspace
    let tokens: [Int]
    let outputRows: Int
    let logits: UnsafeMutablePointer<Float>
    let stages: PassStages
    var failure: KernelError? { stages.failure.error }

    init(model: DecoderModel, plan: DecoderPlan, session: DecoderSession, workspace: DecoderWorkspace, tokens: [Int],
         outputRows: Int, logits: UnsafeMutablePointer<Float>) {
        self.model = model
        self.plan = plan
        self.session = session
        ws = workspace
        self.tokens = tokens
        self.outputRows = outputRows
        self.logits = logits
        stages = PassStages(buffers: workspace.stages, failure: PassFailure())
    }

    func run(on thread: RegionThread) {
        let config = model.config
        let ops = plan.ops
        let (t, d, ff) = (tokens.count, config.hidden, config.feedForward)
        let (heads, kvHeads, headDim) = (config.heads, config.kvHeads, config.headDim)
        let kvWidth = kvHeads * headDim, group = heads / kvHeads
        let start = session.position, eps = config.rmsEpsilon
        let scale = 1 / Float(headDim).squareRoot()
        let cacheType = session.cacheType
        let elementBytes = session.halfPrecision ? 2 : 4
        let ropeMode = model.description.rotaryLayout.abiMode

        for (index, layer) in plan.layers.enumerated() {
            let weights = model.layers[index]
            // Attention: RMSNorm, Q/K/V projections (and biases).
            let attentionInput = stages.stage(thread, width: d, rows: t, group: [layer.q, layer.k, layer.v], into: ws.normed) { part, out in
                self.stages.check(ops.norm.rmsNorm(self.ws.x + part.lowerBound * d, weight: weights.attentionNorm,
                                                   into: out + part.lowerBound * d, rows: part.count, n: d, eps: eps), ops.norm)
            }
            let qColumns = stages.matmul(thread, layer.q, attentionInput, 0, rows: t, into: ws.q)
            let kColumns = stages.matmul(thread, layer.k, attentionInput, 1, rows: t, into: ws.k)
            let vColumns = stages.matmul(thread, layer.v, attentionInput, 2, rows: t, into: ws.v)
            if let qBias = weights.qBias, let kBias = weights.kBias, let vBias = weights.vBias {
                stages.addBias(ops.add, qBias, to: ws.q, width: d, rows: t, columns: qColumns)
                stages.addBias(ops.add, kBias, to: ws.k, width: kvWidth, rows: t, columns: kColumns)
                stages.addBias(ops.add, vBias, to: ws.v, width: kvWidth, rows: t, columns: vColumns)
            }
            thread.barrier()

            // Per-head query/key norm, RoPE on Q and K; K and V into the cache.
            let keys = session.keys(index), values = session.values(index)
            for row in thread.share(of: t) {
                let (query, key) = (ws.q + row * d, ws.k + row * kvWidth)
                if let norm = ops.queryKeyNorm, let qNorm = weights.qNorm, let kNorm = weights.kNorm {
                    stages.check(norm.rmsNorm(query, weight: qNorm, into: query, rows: heads, n: headDim, eps: eps), norm)
                    stages.check(norm.rmsNorm(key, weight: kNorm, into: key, rows: kvHeads, n: headDim, eps: eps), norm)
                }
                let angles = ws.rope + row * headDim
                stages.check(ops.rope.rope(query, heads: heads, headDim: headDim, angles: angles, mode: ropeMode), ops.rope)
                stages.check(ops.rope.rope(key, heads: kvHeads, headDim: headDim, angles: angles, mode: ropeMode), ops.rope)
                let slot = (start + row) * kvWidth * elementBytes
                if session.halfPrecision {
                    ek_fp32_to_fp16_row(key, (keys + slot).assumingMemoryBound(to: UInt16.self), Int64(kvWidth))
                    ek_fp32_to_fp16_row(ws.v + row * kvWidth, (values + slot).assumingMemoryBound(to: UInt16.self), Int64(kvWidth))
                } else {
                    (keys + slot).copyMemory(from: key, byteCount: kvWidth * 4)
                    (values + slot).copyMemory(from: ws.v + row * kvWidth, byteCount: kvWidth * 4)
                }
            }
            thread.barrier()

            // Causal attention — scores, softmax, weighted values — (row, head) pairs dealt round-robin
            // (later rows see more positions).
            let scores = ws.scores[thread.index]
            for item in stride(from: thread.index, to: t * heads, by: thread.count) {
                let (row, head) = item.quotientAndRemainder(dividingBy: heads)
                let kvOffset = (head / group) * headDim * elementBytes
                let (query, out) = (ws.q + row * d + head * headDim, ws.attention + row * d + head * headDim)
                let visible = start + row + 1
                stages.check(ops.scores.attentionScores(cacheType: cacheType, query: query, keys: keys + kvOffset, stride: kvWidth,
                                                        visible: visible, headDim: headDim, scale: scale, into: scores), ops.scores)
                stages.check(ops.softmax.softmax(scores, rows: 1, n: visible), ops.softmax)
                stages.check(ops.values.attentionValues(cacheType: cacheType, weights: scores, values: values + kvOffset, stride: kvWidth,
                                                        visible: visible, headDim: headDim, into: out), ops.values)
            }
            thread.barrier()

            // Output projection, added to the residual stream.
            let projectionInput = stages.stage(thread, width: d, rows: t, group: [layer.o], source: ws.attention)
            stages.addRows(ops.add, ws.projected, to: ws.x, width: d, rows: t,
                           columns: stages.matmul(thread, layer.o, projectionInput, 0, rows: t, into: ws.projected))
            thread.barrier()

            // Feed-forward: RMSNorm, gate and up, SwiGLU, down, added to the residual stream.
            let feedForwardInput = stages.stage(thread, width: d, rows: t, group: [layer.gate, layer.up], into: ws.normed) { part, out in
                self.stages.check(ops.norm.rmsNorm(self.ws.x + part.lowerBound * d, weight: weights.feedForwardNorm,
                                                   into: out + part.lowerBound * d, rows: part.count, n: d, eps: eps), ops.norm)
            }
            stages.matmul(thread, layer.gate, feedForwardInput, 0, rows: t, into: ws.gate)
            stages.matmul(thread, layer.up, feedForwardInput, 1, rows: t, into: ws.up)
            thread.barrier()
            let elements = thread.share(of: t * ff, alignment: 32)
            if !elements.isEmpty {
                stages.check(ops.swiglu.swiglu(gate: ws.gate + elements.lowerBound, up: ws.up + elements.lowerBound,
                                               into: ws.hidden + elements.lowerBound, count: elements.count), ops.swiglu)
            }
            thread.barrier()
            let downInput = stages.stage(thread, width: ff, rows: t, group: [layer.down], source: ws.hidden)
            stages.addRows(ops.add, ws.projected, to: ws.x, width: d, rows: t,
                           columns: stages.matmul(thread, layer.down, downInput, 0, rows: t, into: ws.projected))
            thread.barrier()
        }

        // Final RMSNorm and the output projection, for the rows asked for.
        let first = t - outputRows
        let outputInput = stages.stage(thread, width: d, rows: outputRows, group: [plan.output], into: ws.normed) { part, out in
            self.stages.check(ops.norm.rmsNorm(self.ws.x + (first + part.lowerBound) * d, weight: self.model.outputNorm,
                                               into: out + part.lowerBound * d, rows: part.count, n: d, eps: eps), ops.norm)
        }
        stages.matmul(thread, plan.output, outputInput, 0, rows: outputRows, into: logits)
    }
}
