import _CEmberKernels
import EmberCore
import Foundation

extension DecoderModel {
    /// Runs `tokens` from the session's position and returns the logits of the last `lastLogits` tokens
    /// [lastLogits, vocabulary].
    ///
    /// The whole pass is one job on the route that runs its matmuls (the
    /// neural-engine queue, the GPU submission queue, or the caller's CPU
    /// workers), executed by the options' threads of its QoS class in step:
    /// each stage splits rows, heads or weight rows between them, with a
    /// barrier where a stage needs the previous one's whole output. Each op
    /// calls the backend it was placed on.
    func forward(_ tokens: [Int], session generic: any GenerationSession, options: ExecutionOptions, lastLogits: Int) throws -> Tensor {
        let session = try decoderSession(generic)
        let t = tokens.count
        guard t > 0, session.position + t <= session.capacity else {
            throw KernelError.invalidArgument(argument: "tokens", found: "\(t) at position \(session.position)",
                                              expected: "1 or more, with room in a \(session.capacity)-token context")
        }
        let rows = PassRows(sessions: Array(repeating: session, count: t), positions: Array(session.position..<(session.position + t)))
        return try run(tokens, rows: rows, options: options, lastLogits: lastLogits)
    }

    /// One token for each session, each at its own position, as one pass (continuous batching): the matrix products
    /// see every sequence as a row, attention reads each row's own cache. Returns [sessions.count, vocabulary].
    func forwardBatch(_ tokens: [Int], sessions generics: [any GenerationSession], options: ExecutionOptions) throws -> Tensor {
        guard tokens.count == generics.count, !tokens.isEmpty else {
            throw KernelError.invalidArgument(argument: "tokens", found: "\(tokens.count) for \(generics.count) sessions",
                                              expected: "one token per session, at least one")
        }
        let sessions = try generics.map(decoderSession)
        guard Set(sessions.map { ObjectIdentifier($0) }).count == sessions.count else {
            throw KernelError.invalidArgument(argument: "sessions", found: "a session twice", expected: "each session once per batch")
        }
        for (index, session) in sessions.enumerated() where session.position >= session.capacity || session.halfPrecision != sessions[0].halfPrecision {
            throw KernelError.invalidArgument(argument: "sessions[\(index)]",
                                              found: session.position >= session.capacity ? "a full context" : "another cache precision",
                                              expected: "room for a token, and the cache precision of the batch's first session")
        }
        let rows = PassRows(sessions: sessions, positions: sessions.map(\.position))
        return try run(tokens, rows: rows, options: options, lastLogits: tokens.count)
    }

    /// Whether every one of `count` values is finite: x·0 is 0 for a finite x and NaN otherwise, summed 16 lanes at a
    /// time (a whole vocabulary per output row, so this runs at memory speed rather than one compare per value).
    static func allFinite(_ values: UnsafePointer<Float>, count: Int) -> Bool {
        var lanes = SIMD16<Float>(repeating: 0)
        let raw = UnsafeRawPointer(values)
        for vector in 0..<(count / 16) { lanes += raw.loadUnaligned(fromByteOffset: vector * 64, as: SIMD16<Float>.self) * 0 }
        var index = count / 16 * 16
        var rest: Float = 0
        while index < count {
            rest += values[index] * 0
            index += 1
        }
        return lanes.sum() == 0 && rest == 0
    }

    private func decoderSession(_ generic: any GenerationSession) throws -> DecoderSession {
        guard let session = generic as? DecoderSession else {
            throw KernelError.invalidArgument(argument: "session", found: "\(type(of: generic))", expected: "a session this model made")
        }
        return session
    }

    /// The pass over `tokens`, row r being fed to `rows.sessions[r]` at `rows.positions[r]`; the first session's
    /// workspace serves the pass (the caller holds every session for its duration).
    private func run(_ tokens: [Int], rows: PassRows, options: ExecutionOptions, lastLogits: Int) throws -> Tensor {
        let (t, d) = (tokens.count, config.hidden)
        let session = rows.sessions[0]
        for (row, token) in tokens.enumerated() where !(0..<config.vocabulary).contains(token) {
            throw KernelError.invalidArgument(argument: "tokens[\(row)]", found: "\(token)", expected: "0..<\(config.vocabulary)")
        }
        let plan = try boundPlan(options, cacheType: session.cacheType)
        let qos = options.qos.resolved
        let allowed = max(1, min(options.threads, context.maximumThreads))
        // One session's single-token step: on the allowed threads, or one when one measured faster (StepThreadChooser).
        var chooser = t == 1 && allowed > 1 ? session.stepThreads ?? StepThreadChooser(allowed: allowed) : nil
        let threads = chooser?.threads(allowed: allowed) ?? allowed
        let needed = plan.preparedBytes(t, max(d, config.feedForward, config.queryWidth))
        if session.workspace.map({ $0.rows < t || $0.threads < allowed || $0.preparedBytes < needed }) ?? true {
            session.workspace = DecoderWorkspace(config: config, rows: t, threads: allowed, preparedBytes: plan.preparedBytes)
        }
        let workspace = session.workspace!

        // RoPE angles, once per position: the global layers' and, with a sliding window, the sliding layers'.
        let pairs = Int64(config.headDim / 2)
        for row in 0..<t {
            let position = Int64(rows.positions[row])
            ek_rope_table_scaled(workspace.rope + row * config.headDim, pairs, position,
                                 pow(config.ropeBase, -2 / Float(config.headDim)), config.ropeFrequencyScale, ropeFactors)
            if config.slidingWindow != nil {
                ek_rope_table_scaled(workspace.slidingRope + row * config.headDim, pairs, position,
                                     pow(config.slidingRopeBase, -2 / Float(config.headDim)), 1, ropeFactors)
            }
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

        guard (1...t).contains(lastLogits) else {
            throw KernelError.invalidArgument(argument: "lastLogits", found: "\(lastLogits)", expected: "1 to \(t), the tokens fed")
        }
        let outputRows = lastLogits
        var logits = try Tensor(zeros: [outputRows, config.vocabulary])
        try logits.makeWritable(argument: "logits")
        let pass = DecoderPass(model: self, plan: plan, rows: rows, workspace: workspace, tokens: tokens, threads: threads,
                               outputRows: outputRows, logits: logits.baseAddress.assumingMemoryBound(to: Float.self))
        let meter = context.energyMeter()
        var stepNanoseconds: UInt64 = 0 // the region alone: not the wait for the route's queue (other requests' work)
        try context.routes.run(on: plan.route, qos: qos) {
            let start = DispatchTime.now().uptimeNanoseconds
            context.pool.region(threads: threads, qos: qos, barrierSpinNanoseconds: DecoderPass.barrierSpin(rows: t)) { pass.run(on: $0) }
            stepNanoseconds = DispatchTime.now().uptimeNanoseconds - start
        }
        if let failure = pass.failure { throw failure }
        if var chooser {
            chooser.record(threads: threads, seconds: Double(stepNanoseconds) / 1e9)
            session.stepThreads = chooser
        }
        let values = logits.baseAddress.assumingMemoryBound(to: Float.self)
        if let row = (0..<outputRows).first(where: { !Self.allFinite(values + $0 * config.vocabulary, count: config.vocabulary) }) {
            throw KernelError.rejected(kernel: "decoder", argument: "logits[\(row)]",
                                       status: "NaN or infinite values (the weights or a backend are broken)")
        }
        if let cap = config.finalLogitSoftcap {
            for index in 0..<(outputRows * config.vocabulary) { values[index] = cap * tanh(values[index] / cap) }
        }
        let energy = meter.finish(modelledJoules: plan.report.joulesPerToken * Double(t) - Double(t - outputRows) * plan.outputJoulesPerRow)
        // Each session advances by its rows and carries its share of the pass's energy.
        var rowsPerSession: [ObjectIdentifier: (DecoderSession, Int)] = [:]
        for member in rows.sessions { rowsPerSession[ObjectIdentifier(member), default: (member, 0)].1 += 1 }
        for (member, count) in rowsPerSession.values {
            member.advance(by: count)
            let share = EnergyEstimate(joules: energy.joules * Double(count) / Double(t), source: energy.source)
            member.energyTotal = member.energyTotal.map { $0 + share } ?? share
        }
        return logits
    }
}

/// Which session and position each row of a pass belongs to: one session's consecutive positions for a prompt,
/// one row per session for a batched decode step.
struct PassRows {
    let sessions: [DecoderSession]
    let positions: [Int]
}

/// One forward pass as every thread of its region runs it, top to bottom.
final class DecoderPass: @unchecked Sendable {
    let model: DecoderModel
    let plan: DecoderPlan
    let rows: PassRows
    let ws: DecoderWorkspace
    let tokens: [Int]
    let outputRows: Int
    let logits: UnsafeMutablePointer<Float>
    let stages: PassStages
    var failure: KernelError? { stages.failure.error }

    /// A pass for a region of `threads` threads (its work dealt out among that many; a region that ends up with
    /// another count splits evenly).
    init(model: DecoderModel, plan: DecoderPlan, rows: PassRows, workspace: DecoderWorkspace, tokens: [Int], threads: Int,
         outputRows: Int, logits: UnsafeMutablePointer<Float>) {
        self.model = model
        self.plan = plan
        self.rows = rows
        ws = workspace
        self.tokens = tokens
        self.outputRows = outputRows
        self.logits = logits
        stages = PassStages(buffers: workspace.stages, failure: PassFailure())
        // A few rows (a decode step): the threads deal each matmul's columns out as they go. A prompt's GEMMs keep
        // the even split (their pieces would cost more calls and repacking than the barriers' waits).
        sites = tokens.count <= StageBuffers.privateRows && threads > 1
            ? workspace.workRanges.map { LayerStealSites(ranges: $0, perLayer: Self.sitesPerLayer, threads: threads) } : nil
        if let sites {
            // Sites in the order of stealSite's slots (no array of the matmuls: each copy retains its references).
            for index in plan.layers.indices {
                let layer = plan.layers[index]
                sites.reset(index, columns: layer.q.rows, layer.k.rows, layer.v.rows, layer.o.rows, layer.gate.rows,
                            layer.down.rows)
            }
            sites.reset(plan.layers.count, 0, columns: plan.output.rows)
        }
    }

    /// How long a thread of a pass of `rows` rows spins at a barrier before it parks. A decode step's stages are a few
    /// microseconds each, so a longer wait means the other thread is not running — another process has its core —
    /// and parking at once lets the kernel move that thread onto the idle one. SmolLM2 int4 decode on a 2-core Zen 3
    /// with a busy loop pinned to one core: 43–49 tok/s spinning 200 µs, 83–85 at 20 µs, 87–101 at 10 µs, 96–109 at 5 µs
    /// (one thread alone: 124); without the busy loop 6 alternating runs gave medians 170 (200 µs) and 165 (10 µs),
    /// noise. A
    /// prompt's stages wait longer on each other, and parking costs a wake-up: pp128 ran 13 % slower at 10 µs, so
    /// prompts keep the default (200 µs). fp32 decode's stages are longer (SmolLM2's `ffn_up` 3.5 MB, ~120 µs) and
    /// switch threads ~21 times a token at 10 µs; spinning a quarter of the largest stage (44 µs) cut that to ~7 on a
    /// Zen 4 but not the time: 10 alternating rounds of tg128, medians 53.7 (10 µs) and 52.8 tok/s (2026-12-03).
    static func barrierSpin(rows: Int) -> Int64 {
        rows <= StageBuffers.privateRows ? 10_000 : WorkerPool.defaultBarrierSpinNanoseconds
    }

    /// Where this pass's threads deal out work: nil for the even split.
    private let sites: LayerStealSites?
    /// Sites per layer: Q, K, V, the output projection, gate and up together, down; then one for the logits.
    private static let sitesPerLayer = 6

    /// Sites a pass over `layers` layers uses.
    static func stealSites(layers: Int) -> Int { layers * sitesPerLayer + 1 }

    /// The site of matmul `slot` (0 Q … 5 down) of `layer` (the logits: layer = the layer count, slot 0).
    private func stealSite(_ layer: Int, _ slot: Int) -> StealSite? { sites?.site(layer, slot) }

    func run(on thread: RegionThread) {
        let lane = PassLane(sharing: thread) // a decode step's few rows: every stage shared
        let config = model.config
        let ops = plan.ops
        let (t, d, ff) = (tokens.count, config.hidden, config.feedForward)
        let (heads, kvHeads, headDim, queries) = (config.heads, config.kvHeads, config.headDim, config.queryWidth)
        let kvWidth = config.kvWidth, group = heads / kvHeads
        let eps = config.rmsEpsilon
        let session = rows.sessions[0] // the cache's precision every row's session shares
        let scalesQueries = model.description.scalesQueries
        let scoreScale = scalesQueries ? 1 : config.attentionScale
        let cacheType = session.cacheType
        let ropeMode = model.description.rotaryLayout.abiMode

        for (index, layer) in plan.layers.enumerated() {
            let weights = model.layers[index]
            let sliding = config.slidingLayers[index]
            // Attention: RMSNorm, Q/K/V projections (and biases).
            let attentionInput = stages.stage(lane, width: d, rows: t, group: layer.attention, into: ws.normed) { part, out in
                self.stages.check(ops.norm.rmsNorm(self.ws.x + part.lowerBound * d, weight: weights.attentionNorm,
                                                   into: out + part.lowerBound * d, rows: part.count, n: d, eps: eps), ops.norm)
            }
            stages.matmul(lane, layer.q, attentionInput, 0, rows: t, into: ws.q, site: stealSite(index, 0)) { columns in
                if let bias = weights.qBias { self.stages.addBias(ops.add, bias, to: self.ws.q, width: queries, rows: t, columns: columns) }
            }
            stages.matmul(lane, layer.k, attentionInput, 1, rows: t, into: ws.k, site: stealSite(index, 1)) { columns in
                if let bias = weights.kBias { self.stages.addBias(ops.add, bias, to: self.ws.k, width: kvWidth, rows: t, columns: columns) }
            }
            stages.matmul(lane, layer.v, attentionInput, 2, rows: t, into: ws.v, site: stealSite(index, 2)) { columns in
                if let bias = weights.vBias { self.stages.addBias(ops.add, bias, to: self.ws.v, width: kvWidth, rows: t, columns: columns) }
            }
            thread.barrier()

            // Per-head query/key norm, RoPE on Q and K (the sliding layers' angles where the layer slides), queries
            // scaled where the family scales them; K and V into the cache.
            let rope = sliding ? ws.slidingRope : ws.rope
            for row in thread.share(of: t) {
                let cache = rows.sessions[row]
                let keys = cache.keys(index), values = cache.values(index)
                let (query, key) = (ws.q + row * queries, ws.k + row * kvWidth)
                if let norm = ops.queryKeyNorm, let qNorm = weights.qNorm, let kNorm = weights.kNorm {
                    stages.check(norm.rmsNorm(query, weight: qNorm, into: query, rows: heads, n: headDim, eps: eps), norm)
                    stages.check(norm.rmsNorm(key, weight: kNorm, into: key, rows: kvHeads, n: headDim, eps: eps), norm)
                }
                let angles = rope + row * headDim
                stages.check(ops.rope.rope(query, heads: heads, headDim: headDim, angles: angles, mode: ropeMode), ops.rope)
                stages.check(ops.rope.rope(key, heads: kvHeads, headDim: headDim, angles: angles, mode: ropeMode), ops.rope)
                if scalesQueries {
                    for i in 0..<queries { query[i] *= config.attentionScale }
                }
                for head in 0..<kvHeads {
                    let slot = cache.slot(head: head, position: rows.positions[row])
                    let (key, value) = (key + head * headDim, ws.v + row * kvWidth + head * headDim)
                    if session.halfPrecision {
                        ek_fp32_to_fp16_row(key, (keys + slot).assumingMemoryBound(to: UInt16.self), Int64(headDim))
                        ek_fp32_to_fp16_row(value, (values + slot).assumingMemoryBound(to: UInt16.self), Int64(headDim))
                    } else {
                        (keys + slot).copyMemory(from: key, byteCount: headDim * 4)
                        (values + slot).copyMemory(from: value, byteCount: headDim * 4)
                    }
                }
            }
            thread.barrier()

            // Causal attention with the softmax online, over the whole context or the window of a sliding layer. A
            // prompt's (row, key/value head) pairs are dealt round-robin (later rows see more positions), the query
            // heads of each pair in one pass over its keys and values (the backend's grouped form, else head by
            // head): pp128 after 1,024 tokens 559 → 690 tok/s on a Zen 4. A decode step's few rows deal their heads
            // round-robin one at a time: grouped there, a step has as many items as key/value heads (3 in SmolLM2:
            // 2 + 1 on two threads), and decoding after 1,024 tokens measured slower (medians 185 → 151 tok/s, 4
            // alternating rounds; 114 → 111 with the older per-position cache) — a group's second and third heads
            // find its rows in L2.
            func attend(_ row: Int, _ firstHead: Int, _ count: Int) {
                let position = rows.positions[row]
                let cache = rows.sessions[row]
                let keys = cache.keys(index), values = cache.values(index)
                let first = sliding ? max(0, position + 1 - config.slidingWindow!) : 0
                let offset = cache.slot(head: firstHead / group, position: first)
                let at = row * queries + firstHead * headDim
                stages.check(ops.attention.attention(cacheType: cacheType, queries: ws.q + at, heads: count, keys: keys + offset,
                                                     values: values + offset, stride: headDim, visible: position + 1 - first,
                                                     headDim: headDim, scale: scoreScale, into: ws.attention + at), ops.attention)
            }
            if t * kvHeads >= 4 * thread.count {
                for item in stride(from: thread.index, to: t * kvHeads, by: thread.count) {
                    let (row, kvHead) = item.quotientAndRemainder(dividingBy: kvHeads)
                    attend(row, kvHead * group, group)
                }
            } else {
                for item in stride(from: thread.index, to: t * heads, by: thread.count) {
                    let (row, head) = item.quotientAndRemainder(dividingBy: heads)
                    attend(row, head, 1)
                }
            }
            thread.barrier()

            // Output projection, added to the residual stream (normalized first where the family has post-norms).
            let projectionInput = stages.stage(lane, width: queries, rows: t, group: layer.projection, source: ws.attention)
            stages.matmul(lane, layer.o, projectionInput, 0, rows: t, into: ws.projected, site: stealSite(index, 3)) { columns in
                self.addToResidual(ops, projected: columns, postNorm: weights.postAttentionNorm, rows: t)
            }
            finishResidual(thread, ops, postNorm: weights.postAttentionNorm, rows: t)

            // Feed-forward: RMSNorm, gate and up, SwiGLU or GeGLU, down, added to the residual stream.
            let feedForwardInput = stages.stage(lane, width: d, rows: t, group: layer.feedForward, into: ws.normed) { part, out in
                self.stages.check(ops.norm.rmsNorm(self.ws.x + part.lowerBound * d, weight: weights.feedForwardNorm,
                                                   into: out + part.lowerBound * d, rows: part.count, n: d, eps: eps), ops.norm)
            }
            if layer.gate.splittable == layer.up.splittable && layer.gate.rows == layer.up.rows {
                // Both split alike (a property of the plan: every thread takes this branch): each piece of columns
                // runs gate and up, then activates those columns of every row — no barrier between the matmuls and
                // the activation.
                stages.forEachPiece(lane, of: layer.gate, site: stealSite(index, 4)) { columns in
                    stages.run(layer.gate, feedForwardInput, 0, inputRows: 0..<t, into: ws.gate, columns: columns)
                    stages.run(layer.up, feedForwardInput, 1, inputRows: 0..<t, into: ws.up, columns: columns)
                    for row in 0..<t {
                        let offset = row * ff + columns.lowerBound
                        gatedActivation(ops, gate: ws.gate + offset, up: ws.up + offset, into: ws.hidden + offset, count: columns.count)
                    }
                }
            } else {
                stages.matmul(lane, layer.gate, feedForwardInput, 0, rows: t, into: ws.gate)
                stages.matmul(lane, layer.up, feedForwardInput, 1, rows: t, into: ws.up)
                thread.barrier()
                let elements = thread.share(of: t * ff, alignment: 32)
                if !elements.isEmpty {
                    let offset = elements.lowerBound
                    gatedActivation(ops, gate: ws.gate + offset, up: ws.up + offset, into: ws.hidden + offset, count: elements.count)
                }
            }
            thread.barrier()
            let downInput = stages.stage(lane, width: ff, rows: t, group: layer.downProjection, source: ws.hidden)
            stages.matmul(lane, layer.down, downInput, 0, rows: t, into: ws.projected, site: stealSite(index, 5)) { columns in
                self.addToResidual(ops, projected: columns, postNorm: weights.postFeedForwardNorm, rows: t)
            }
            finishResidual(thread, ops, postNorm: weights.postFeedForwardNorm, rows: t)
        }

        // Final RMSNorm and the output projection, for the rows asked for.
        let first = t - outputRows
        let outputInput = stages.stage(lane, width: d, rows: outputRows, group: plan.outputStage, into: ws.normed) { part, out in
            self.stages.check(ops.norm.rmsNorm(self.ws.x + (first + part.lowerBound) * d, weight: self.model.outputNorm,
                                               into: out + part.lowerBound * d, rows: part.count, n: d, eps: eps), ops.norm)
        }
        stages.matmul(lane, plan.output, outputInput, 0, rows: outputRows, into: logits, site: stealSite(plan.layers.count, 0))
    }

    /// SwiGLU or GeGLU (the family's) of `count` gate and up values into `out`.
    private func gatedActivation(_ ops: DecoderOps, gate: UnsafeMutablePointer<Float>, up: UnsafeMutablePointer<Float>,
                                 into out: UnsafeMutablePointer<Float>, count: Int) {
        if model.description.feedForward == .geglu {
            stages.check(ops.gatedActivation.geglu(gate: gate, up: up, into: out, count: count), ops.gatedActivation)
        } else {
            stages.check(ops.gatedActivation.swiglu(gate: gate, up: up, into: out, count: count), ops.gatedActivation)
        }
    }

    /// x[:, columns] += ws.projected[:, columns], for the columns this thread just computed — without a post-norm;
    /// with one (Gemma) every row must be whole first: ``finishResidual(_:_:postNorm:rows:)`` adds it.
    private func addToResidual(_ ops: DecoderOps, projected columns: Range<Int>, postNorm: UnsafePointer<Float>?, rows t: Int) {
        guard postNorm == nil else { return }
        stages.addRows(ops.add, ws.projected, to: ws.x, width: model.config.hidden, rows: t, columns: columns)
    }

    /// The residual stream whole again, then a barrier: without a post-norm every thread has added its columns;
    /// with one, the threads meet, then each normalizes and adds its rows.
    private func finishResidual(_ thread: RegionThread, _ ops: DecoderOps, postNorm: UnsafePointer<Float>?, rows t: Int) {
        let d = model.config.hidden
        guard let postNorm else {
            thread.barrier()
            return
        }
        thread.barrier()
        for row in thread.share(of: t) {
            let projected = ws.projected + row * d
            stages.check(ops.norm.rmsNorm(projected, weight: postNorm, into: projected, rows: 1, n: d, eps: model.config.rmsEpsilon), ops.norm)
            stages.check(ops.add.add(ws.x + row * d, projected, count: d), ops.add)
        }
        thread.barrier()
    }
}
