import CKernels
import Foundation

/// A Llama-family decoder (SmolLM2) read from GGUF. The file reads top to
/// bottom like llama2.c: config, weights, run state, forward. Every matmul
/// goes through ``ComputeEngine`` so the units and precision decided for a
/// request apply; norms, RoPE and attention run in fp32 on the CPU route.
public final class LlamaModel: @unchecked Sendable {
    // MARK: Config

    public struct Config: Sendable, Equatable {
        public var layers: Int
        public var hidden: Int
        public var feedForward: Int
        public var heads: Int
        public var kvHeads: Int
        public var headDim: Int
        public var vocabulary: Int
        public var ropeBase: Float
        public var rmsEpsilon: Float
        public var contextLength: Int
    }

    // MARK: Weights

    struct Layer {
        let attentionNorm: [Float]
        let q, k, v, o: WeightMatrix
        let feedForwardNorm: [Float]
        let gate, up, down: WeightMatrix
    }

    public let config: Config
    public let tokenizer: ByteLevelBPE
    let file: GGUFFile
    let embedding: WeightMatrix       // [vocabulary × hidden], also the tied output projection
    let layers: [Layer]
    let outputNorm: [Float]

    public init(file: GGUFFile) throws {
        self.file = file
        func integer(_ key: String) throws -> Int {
            guard let value = try file.require(key).integer, value > 0 else {
                throw ModelFileError.invalidField(file: file.path, field: key, found: "\(file.metadata[key].map { "\($0)" } ?? "?")", expected: "a positive integer")
            }
            return value
        }
        let architecture = try file.require("general.architecture").string ?? ""
        guard architecture == "llama" else {
            throw ModelFileError.invalidField(file: file.path, field: "general.architecture", found: architecture, expected: "llama")
        }
        let hidden = try integer("llama.embedding_length"), heads = try integer("llama.attention.head_count")
        config = Config(
            layers: try integer("llama.block_count"), hidden: hidden, feedForward: try integer("llama.feed_forward_length"),
            heads: heads, kvHeads: try integer("llama.attention.head_count_kv"), headDim: hidden / heads,
            vocabulary: try file.tensor("token_embd.weight").dimensions[1],
            ropeBase: Float(file.metadata["llama.rope.freq_base"]?.number ?? 10000),
            rmsEpsilon: Float(file.metadata["llama.attention.layer_norm_rms_epsilon"]?.number ?? 1e-5),
            contextLength: try integer("llama.context_length"))
        tokenizer = try ByteLevelBPE(gguf: file)
        embedding = try file.weightMatrix("token_embd.weight")
        func vector(_ name: String) throws -> [Float] {
            let info = try file.tensor(name)
            guard info.type.name == "F32", info.elementCount == hidden else {
                throw ModelFileError.invalidField(file: file.path, field: "tensors[\(name)]", found: "\(info.type) \(info.dimensions)", expected: "F32 [\(hidden)]")
            }
            return Array(file.bytes(of: info).bindMemory(to: Float.self))
        }
        layers = try (0..<config.layers).map { index in
            let prefix = "blk.\(index)."
            return Layer(
                attentionNorm: try vector(prefix + "attn_norm.weight"),
                q: try file.weightMatrix(prefix + "attn_q.weight"), k: try file.weightMatrix(prefix + "attn_k.weight"),
                v: try file.weightMatrix(prefix + "attn_v.weight"), o: try file.weightMatrix(prefix + "attn_output.weight"),
                feedForwardNorm: try vector(prefix + "ffn_norm.weight"),
                gate: try file.weightMatrix(prefix + "ffn_gate.weight"), up: try file.weightMatrix(prefix + "ffn_up.weight"),
                down: try file.weightMatrix(prefix + "ffn_down.weight"))
        }
        outputNorm = try vector("output_norm.weight")
    }

    // MARK: Run state

    /// One conversation's KV cache, sized from the context asked for. With
    /// `halfPrecision` (the default, as llama.cpp's) keys and values are kept
    /// at fp16 precision, and the attention products round their other operand
    /// to fp16 as llama.cpp's f16 dot products do.
    public final class Session {
        public let capacity: Int
        public let halfPrecision: Bool
        public private(set) var position = 0
        var keys: [[Float]]     // per layer: [capacity × kvHeads × headDim]
        var values: [[Float]]

        init(config: Config, capacity: Int, halfPrecision: Bool) {
            self.capacity = capacity
            self.halfPrecision = halfPrecision
            let size = capacity * config.kvHeads * config.headDim
            keys = Array(repeating: [Float](repeating: 0, count: size), count: config.layers)
            values = keys
        }

        func advance(by count: Int) { position += count }
    }

    public func makeSession(contextLength: Int = 2048, halfPrecisionCache: Bool = true) -> Session {
        Session(config: config, capacity: min(contextLength, config.contextLength), halfPrecision: halfPrecisionCache)
    }

    // MARK: Forward

    /// Runs `tokens` from the session's position; returns logits [tokens.count or 1, vocabulary].
    public func forward(_ tokens: [Int], session: Session, units: ComputeUnits = .cpuAndNeuralEngine,
                        precision: Precision? = nil, allLogits: Bool = false) throws -> Tensor {
        let (t, d) = (tokens.count, config.hidden)
        guard t > 0, session.position + t <= session.capacity else {
            throw KernelError.invalidArgument(argument: "tokens", found: "\(t) at position \(session.position)", expected: "room in a \(session.capacity)-token context")
        }
        let engine = ComputeEngine.shared
        func mm(_ x: Tensor, _ w: WeightMatrix) throws -> Tensor {
            try engine.matmul(x, try precision.map { try w.variant(for: $0) } ?? w, units: units).output
        }
        // Token embedding: one dequantized row per token.
        var x = [Float](repeating: 0, count: t * d)
        let rowBytes = embedding.format.byteCount(rows: 1, columns: d)
        for (row, token) in tokens.enumerated() {
            guard (0..<config.vocabulary).contains(token) else {
                throw KernelError.invalidArgument(argument: "tokens[\(row)]", found: "\(token)", expected: "0..<\(config.vocabulary)")
            }
            try x.withUnsafeMutableBufferPointer { out in
                try KernelError.check(ek_dequantize_row(KernelISA.active.cValue, embedding.format.quantized!.cValue,
                                                        embedding.bytes.baseAddress! + token * rowBytes, out.baseAddress! + row * d, Int64(d)),
                                      kernel: "ek_dequantize_row", argument: { _ in "token_embd" })
            }
        }
        let (heads, kvHeads, headDim) = (config.heads, config.kvHeads, config.headDim)
        let kvWidth = kvHeads * headDim, start = session.position
        for (index, layer) in layers.enumerated() {
            // Attention: RMSNorm, projections, RoPE, cache, causal softmax over the cache.
            let normed = try Tensor(shape: [t, d], values: rmsNorm(x, layer.attentionNorm, rows: t))
            var q = try mm(normed, layer.q).scalars()
            var k = try mm(normed, layer.k).scalars()
            var v = try mm(normed, layer.v).scalars()
            let half = session.halfPrecision
            func round16(_ value: Float) -> Float { ek_fp16_to_fp32(ek_fp32_to_fp16(value)) }
            for row in 0..<t {
                rope(&q, offset: row * d, heads: heads, position: start + row)
                rope(&k, offset: row * kvWidth, heads: kvHeads, position: start + row)
                if half {
                    for i in (row * kvWidth)..<((row + 1) * kvWidth) { k[i] = round16(k[i]); v[i] = round16(v[i]) }
                    for i in (row * d)..<((row + 1) * d) { q[i] = round16(q[i]) }
                }
                let slot = (start + row) * kvWidth
                session.keys[index].replaceSubrange(slot..<(slot + kvWidth), with: k[(row * kvWidth)..<((row + 1) * kvWidth)])
                session.values[index].replaceSubrange(slot..<(slot + kvWidth), with: v[(row * kvWidth)..<((row + 1) * kvWidth)])
            }
            var attention = [Float](repeating: 0, count: t * d)
            let scale = 1 / Float(headDim).squareRoot()
            let group = heads / kvHeads
            session.keys[index].withUnsafeBufferPointer { keys in
                session.values[index].withUnsafeBufferPointer { values in
                    var scores = [Float](repeating: 0, count: start + t)
                    for row in 0..<t {
                        let visible = start + row + 1
                        for head in 0..<heads {
                            let kvHead = head / group
                            let qBase = row * d + head * headDim
                            var maximum = -Float.infinity
                            for position in 0..<visible {
                                let kBase = position * kvWidth + kvHead * headDim
                                var dot: Float = 0
                                for i in 0..<headDim { dot += q[qBase + i] * keys[kBase + i] }
                                scores[position] = dot * scale
                                maximum = max(maximum, scores[position])
                            }
                            var sum = 0.0
                            for position in 0..<visible {
                                scores[position] = exp(scores[position] - maximum)
                                sum += Double(scores[position])
                            }
                            let total = Float(sum)
                            let outBase = row * d + head * headDim
                            for position in 0..<visible {
                                let weight = half ? round16(scores[position] / total) : scores[position] / total
                                let vBase = position * kvWidth + kvHead * headDim
                                for i in 0..<headDim { attention[outBase + i] += weight * values[vBase + i] }
                            }
                        }
                    }
                }
            }
            let projected = try mm(try Tensor(shape: [t, d], values: attention), layer.o).scalars()
            for i in x.indices { x[i] += projected[i] }
            // Feed-forward: RMSNorm, SwiGLU.
            let normed2 = try Tensor(shape: [t, d], values: rmsNorm(x, layer.feedForwardNorm, rows: t))
            let gate = try mm(normed2, layer.gate).scalars(), up = try mm(normed2, layer.up).scalars()
            var hidden = [Float](repeating: 0, count: gate.count)
            for i in hidden.indices { hidden[i] = gate[i] / (1 + exp(-gate[i])) * up[i] }
            let down = try mm(try Tensor(shape: [t, config.feedForward], values: hidden), layer.down).scalars()
            for i in x.indices { x[i] += down[i] }
        }
        session.advance(by: t)
        let rows = allLogits ? t : 1
        let last = Array(x[((t - rows) * d)...])
        let final = try Tensor(shape: [rows, d], values: rmsNorm(last, outputNorm, rows: rows))
        return try mm(final, embedding) // tied output projection
    }

    func rmsNorm(_ x: [Float], _ weight: [Float], rows: Int) -> [Float] {
        let d = config.hidden
        var out = [Float](repeating: 0, count: rows * d)
        for row in 0..<rows {
            var sum = 0.0 // accumulated in double, as ggml does
            for i in 0..<d { sum += Double(x[row * d + i] * x[row * d + i]) }
            let mean = Float(sum / Double(d))
            let scale = 1 / (mean + config.rmsEpsilon).squareRoot()
            for i in 0..<d { out[row * d + i] = x[row * d + i] * scale * weight[i] }
        }
        return out
    }

    /// RoPE on adjacent pairs (the "normal" mode, not NeoX), per head. The
    /// angle advances by repeated multiplication in fp32, as ggml computes it.
    func rope(_ x: inout [Float], offset: Int, heads: Int, position: Int) {
        let headDim = config.headDim
        let thetaScale = pow(config.ropeBase, -2 / Float(headDim))
        var angles = [(Float, Float)](repeating: (1, 0), count: headDim / 2)
        var theta = Float(position)
        for pair in 0..<(headDim / 2) {
            angles[pair] = (cos(theta), sin(theta))
            theta *= thetaScale
        }
        for head in 0..<heads {
            for pair in 0..<(headDim / 2) {
                let (cosine, sine) = angles[pair]
                let i = offset + head * headDim + 2 * pair
                let (a, b) = (x[i], x[i + 1])
                x[i] = a * cosine - b * sine
                x[i + 1] = a * sine + b * cosine
            }
        }
    }

    /// Greedy generation: up to `maxTokens` new ids, stopping at end-of-generation.
    public func generateGreedy(prompt: [Int], maxTokens: Int, units: ComputeUnits = .cpuAndNeuralEngine,
                               precision: Precision? = nil) throws -> [Int] {
        let session = makeSession(contextLength: prompt.count + maxTokens + 1)
        var logits = try forward(prompt, session: session, units: units, precision: precision)
        var generated: [Int] = []
        for _ in 0..<maxTokens {
            let values = try logits.scalars()
            let next = values.indices.max { values[$0] < values[$1] }!
            generated.append(next)
            if next == tokenizer.eosID { break }
            logits = try forward([next], session: session, units: units, precision: precision)
        }
        return generated
    }
}
