import Foundation
import Testing
import Ember
@testable import EmberModels
import EmberTestSupport

/// The decoder, for every variant its description can take, against a plain
/// reference written from the equations (every sum in Double), on synthetic
/// files (random weights: a fake for checking the arithmetic, not a model).
@Suite("Decoder descriptions against a plain reference")
struct DecoderReferenceTests {
    /// One variant: how the description differs from Llama, and the tensors the file then carries.
    struct Variant: Sendable, CustomStringConvertible {
        var name: String
        var rotaryLayout: DecoderDescription.RotaryLayout = .adjacentPairs
        var attentionBiases = false
        var queryKeyNorm = false
        var embeddingScale = false
        var separateOutput = false

        var description: String { name }

        var decoder: DecoderDescription {
            DecoderDescription(architecture: "testarch", rotaryLayout: rotaryLayout, attentionBiases: attentionBiases,
                               queryKeyNorm: queryKeyNorm, embeddingScale: embeddingScale ? .squareRootOfWidth : nil)
        }
    }

    static let variants: [Variant] = [
        Variant(name: "llama"),
        Variant(name: "NeoX RoPE", rotaryLayout: .halves),
        Variant(name: "Q/K/V biases", attentionBiases: true),
        Variant(name: "query/key norm", queryKeyNorm: true),
        Variant(name: "scaled embeddings, separate output", embeddingScale: true, separateOutput: true),
        Variant(name: "all at once", rotaryLayout: .halves, attentionBiases: true, queryKeyNorm: true, embeddingScale: true,
                separateOutput: true),
    ]

    static let (hidden, heads, kvHeads, feedForward, vocabulary) = (64, 4, 2, 128, 48)
    static var headDim: Int { hidden / heads }

    /// The tiny Llama file renamed to "testarch", with the variant's extra tensors.
    static func file(_ variant: Variant) -> SyntheticGGUF {
        var gguf = SyntheticGGUF.tinyLlama()
        gguf.metadata = gguf.metadata.map { key, value in
            key == "general.architecture" ? (key, .string("testarch")) : (key.replacingOccurrences(of: "llama.", with: "testarch."), value)
        }
        var generator = SplitMix64(seed: 99)
        func vector(_ name: String, _ count: Int, around center: Float, spread: Float) -> SyntheticGGUF.Tensor {
            let values = (0..<count).map { _ in center + (generator.nextUnitFloat() - 0.5) * spread }
            return SyntheticGGUF.Tensor(name: name, dimensions: [count], typeID: 0,
                                        data: values.flatMap { value in withUnsafeBytes(of: value.bitPattern.littleEndian) { Array($0) } })
        }
        let kvWidth = kvHeads * headDim
        for layer in 0..<2 {
            let prefix = "blk.\(layer)."
            if variant.attentionBiases {
                gguf.tensors += [vector(prefix + "attn_q.bias", hidden, around: 0, spread: 1), vector(prefix + "attn_k.bias", kvWidth, around: 0, spread: 1),
                                 vector(prefix + "attn_v.bias", kvWidth, around: 0, spread: 1)]
            }
            if variant.queryKeyNorm {
                gguf.tensors += [vector(prefix + "attn_q_norm.weight", headDim, around: 1, spread: 0.4),
                                 vector(prefix + "attn_k_norm.weight", headDim, around: 1, spread: 0.4)]
            }
        }
        if variant.separateOutput {
            let values = (0..<(vocabulary * hidden)).map { _ in (generator.nextUnitFloat() - 0.5) * 2 }
            gguf.tensors.append(SyntheticGGUF.Tensor(name: "output.weight", dimensions: [hidden, vocabulary], typeID: 0,
                                                     data: values.flatMap { withUnsafeBytes(of: $0.bitPattern.littleEndian) { Array($0) } }))
        }
        return gguf
    }

    /// The fp32 values of an F32 tensor of `gguf`.
    static func values(_ gguf: SyntheticGGUF, _ name: String) -> [Double]? {
        guard let tensor = gguf.tensors.first(where: { $0.name == name }) else { return nil }
        return stride(from: 0, to: tensor.data.count, by: 4).map { offset in
            let bits = (0..<4).reduce(UInt32(0)) { $0 | UInt32(tensor.data[offset + $1]) << (8 * UInt32($1)) }
            return Double(Float(bitPattern: bits))
        }
    }

    /// Logits for every position of `tokens`, from the equations.
    static func reference(_ gguf: SyntheticGGUF, _ variant: Variant, tokens: [Int]) -> [[Double]] {
        let (d, hd, ff) = (hidden, headDim, feedForward)
        let eps = 1e-5
        func tensor(_ name: String) -> [Double] { Self.values(gguf, name)! }
        /// y = W·x with W [rows × columns], row-major.
        func multiply(_ w: [Double], _ x: [Double], rows: Int) -> [Double] {
            let columns = x.count
            return (0..<rows).map { r in (0..<columns).reduce(0.0) { $0 + w[r * columns + $1] * x[$1] } }
        }
        func rmsNorm(_ x: [Double], _ w: [Double]) -> [Double] {
            let scale = 1 / ((x.reduce(0.0) { $0 + $1 * $1 } / Double(x.count)) + eps).squareRoot()
            return zip(x, w).map { $0 * scale * $1 }
        }
        func rope(_ head: inout ArraySlice<Double>, position: Int) {
            let base = head.startIndex
            for p in 0..<(hd / 2) {
                let theta = Double(position) * pow(10000, -2 * Double(p) / Double(hd))
                let (i, j) = variant.rotaryLayout == .adjacentPairs ? (base + 2 * p, base + 2 * p + 1) : (base + p, base + p + hd / 2)
                let (a, b) = (head[i], head[j])
                head[i] = a * cos(theta) - b * sin(theta)
                head[j] = a * sin(theta) + b * cos(theta)
            }
        }
        let embeddings = tensor("token_embd.weight")
        let scale = variant.embeddingScale ? Double(Float(d).squareRoot()) : 1
        var xs = tokens.map { token in (0..<d).map { embeddings[token * d + $0] * scale } }
        var cachedKeys: [[[Double]]] = Array(repeating: [], count: 2), cachedValues: [[[Double]]] = Array(repeating: [], count: 2)
        for layer in 0..<2 {
            let p = "blk.\(layer)."
            for (position, x) in xs.enumerated() {
                let h = rmsNorm(x, tensor(p + "attn_norm.weight"))
                var q = multiply(tensor(p + "attn_q.weight"), h, rows: d), k = multiply(tensor(p + "attn_k.weight"), h, rows: kvHeads * hd)
                var v = multiply(tensor(p + "attn_v.weight"), h, rows: kvHeads * hd)
                if variant.attentionBiases {
                    q = zip(q, tensor(p + "attn_q.bias")).map(+); k = zip(k, tensor(p + "attn_k.bias")).map(+)
                    v = zip(v, tensor(p + "attn_v.bias")).map(+)
                }
                if variant.queryKeyNorm {
                    q = (0..<heads).flatMap { rmsNorm(Array(q[($0 * hd)..<($0 * hd + hd)]), tensor(p + "attn_q_norm.weight")) }
                    k = (0..<kvHeads).flatMap { rmsNorm(Array(k[($0 * hd)..<($0 * hd + hd)]), tensor(p + "attn_k_norm.weight")) }
                }
                for head in 0..<heads { var slice = q[(head * hd)..<(head * hd + hd)]; rope(&slice, position: position); q.replaceSubrange((head * hd)..<(head * hd + hd), with: slice) }
                for head in 0..<kvHeads { var slice = k[(head * hd)..<(head * hd + hd)]; rope(&slice, position: position); k.replaceSubrange((head * hd)..<(head * hd + hd), with: slice) }
                cachedKeys[layer].append(k)
                cachedValues[layer].append(v)
                var attention = [Double](repeating: 0, count: d)
                for head in 0..<heads {
                    let kv = head / (heads / kvHeads)
                    let scores = (0...position).map { t in (0..<hd).reduce(0.0) { $0 + q[head * hd + $1] * cachedKeys[layer][t][kv * hd + $1] } / Double(hd).squareRoot() }
                    let top = scores.max()!
                    let weights = scores.map { exp($0 - top) }, total = weights.reduce(0, +)
                    for t in 0...position { for i in 0..<hd { attention[head * hd + i] += weights[t] / total * cachedValues[layer][t][kv * hd + i] } }
                }
                var y = zip(x, multiply(tensor(p + "attn_output.weight"), attention, rows: d)).map(+)
                let h2 = rmsNorm(y, tensor(p + "ffn_norm.weight"))
                let gate = multiply(tensor(p + "ffn_gate.weight"), h2, rows: ff), up = multiply(tensor(p + "ffn_up.weight"), h2, rows: ff)
                let hiddenValues = zip(gate, up).map { g, u in g / (1 + exp(-g)) * u }
                y = zip(y, multiply(tensor(p + "ffn_down.weight"), hiddenValues, rows: d)).map(+)
                xs[position] = y
            }
        }
        let output = Self.values(gguf, "output.weight") ?? embeddings
        return xs.map { multiply(output, rmsNorm($0, tensor("output_norm.weight")), rows: vocabulary) }
    }

    @Test(arguments: variants)
    func decoderMatchesTheReference(variant: Variant) throws {
        let gguf = Self.file(variant)
        var registry = ArchitectureRegistry()
        registry.register(textGenerator: variant.decoder)
        let model = try gguf.withFile { try registry.loadTextGenerator(path: $0, context: TestCompute.context) }
        let tokens = [3, 41, 7, 19, 0, 33, 12]
        let expected = Self.reference(gguf, variant, tokens: tokens).flatMap { $0 }
        let scale = expected.map(abs).max()!
        for units in [ComputeUnits.cpuAndGPU, .cpuOnly] {
            let session = model.makeSession(contextLength: 16, halfPrecisionCache: false)
            let got = try model.forward(tokens, session: session, options: ExecutionOptions(units: units, precision: .fp32), allLogits: true)
                .scalars()
            let worst = zip(got, expected).map { abs(Double($0) - $1) }.max()!
            #expect(worst <= 1e-4 * scale, "\(variant) on \(units): largest difference \(worst) of \(scale)")
        }
    }

    /// A description that asks for tensors the file lacks is refused naming them.
    @Test func missingVariantTensorsAreNamed() throws {
        var registry = ArchitectureRegistry()
        registry.register(textGenerator: Variant(name: "biases", attentionBiases: true).decoder)
        let path = try Self.file(Variant(name: "none")).write()
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(throws: ModelFileError.self) { try registry.loadTextGenerator(path: path, context: TestCompute.context) }
        do {
            _ = try registry.loadTextGenerator(path: path, context: TestCompute.context)
        } catch {
            #expect("\(error)".contains("blk.0.attn_q.bias"), "\(error)")
        }
    }

    /// An architecture no description is registered for is refused naming the field and what Ember runs.
    @Test func unknownArchitectureIsRefused() throws {
        let path = try Self.file(Variant(name: "llama")).write()
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            _ = try ArchitectureRegistry.standard.loadTextGenerator(path: path, context: TestCompute.context)
            Issue.record("testarch was loaded by the standard registry")
        } catch {
            #expect("\(error)".contains("general.architecture") && "\(error)".contains("testarch") && "\(error)".contains("llama"), "\(error)")
        }
    }
}
