import Foundation
import Ember

/// Writes small GGUF files for tests: any metadata, any tensors (synthetic,
/// not a real model), in the layout the GGUF specification describes.
public struct SyntheticGGUF {
    public struct Tensor {
        public var name: String
        public var dimensions: [Int]
        public var typeID: UInt32
        public var data: [UInt8]
        public init(name: String, dimensions: [Int], typeID: UInt32, data: [UInt8]) {
            (self.name, self.dimensions, self.typeID, self.data) = (name, dimensions, typeID, data)
        }
    }

    public var version: UInt32 = 3
    public var metadata: [(String, GGUFValue)] = []
    public var tensors: [Tensor] = []
    public var alignment = 32

    public init() {}

    /// The file's bytes, and where the header (everything before the data) ends.
    public func encode() -> (bytes: [UInt8], headerLength: Int) {
        var out: [UInt8] = []
        func put<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { out += $0 } }
        func putString(_ text: String) {
            put(UInt64(text.utf8.count))
            out += Array(text.utf8)
        }
        func typeID(_ value: GGUFValue) -> UInt32 {
            switch value {
            case .uint8: 0
            case .int8: 1
            case .uint16: 2
            case .int16: 3
            case .uint32: 4
            case .int32: 5
            case .float32: 6
            case .bool: 7
            case .string: 8
            case .array: 9
            case .uint64: 10
            case .int64: 11
            case .float64: 12
            }
        }
        func putValue(_ value: GGUFValue) {
            switch value {
            case let .uint8(v): put(v)
            case let .int8(v): put(v)
            case let .uint16(v): put(v)
            case let .int16(v): put(v)
            case let .uint32(v): put(v)
            case let .int32(v): put(v)
            case let .float32(v): put(v.bitPattern)
            case let .bool(v): put(UInt8(v ? 1 : 0))
            case let .string(v): putString(v)
            case let .array(items):
                put(items.first.map(typeID) ?? 4)
                put(UInt64(items.count))
                items.forEach(putValue)
            case let .uint64(v): put(v)
            case let .int64(v): put(v)
            case let .float64(v): put(v.bitPattern)
            }
        }
        put(UInt32(0x4655_4747))
        put(version)
        put(UInt64(tensors.count))
        put(UInt64(metadata.count))
        for (key, value) in metadata {
            putString(key)
            put(typeID(value))
            putValue(value)
        }
        var offset = 0
        var offsets: [Int] = []
        for tensor in tensors {
            offsets.append(offset)
            offset = (offset + tensor.data.count + alignment - 1) / alignment * alignment
        }
        for (tensor, start) in zip(tensors, offsets) {
            putString(tensor.name)
            put(UInt32(tensor.dimensions.count))
            tensor.dimensions.forEach { put(UInt64($0)) }
            put(tensor.typeID)
            put(UInt64(start))
        }
        let headerLength = out.count
        while out.count % alignment != 0 { out.append(0) }
        let dataStart = out.count
        for (tensor, start) in zip(tensors, offsets) {
            while out.count < dataStart + start { out.append(0) }
            out += tensor.data
        }
        return (out, headerLength)
    }

    /// Writes the file to a new temporary path and returns it; the caller removes it (or use ``withFile(_:)``).
    public func write(_ bytes: [UInt8]? = nil) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("ember-synthetic-\(UUID().uuidString).gguf")
        try Data(bytes ?? encode().bytes).write(to: url)
        return url.path
    }

    /// Writes the file to a temporary path, runs `body` with it and removes the file — a model loaded in `body`
    /// keeps working, its mapping outlives the name. (Files left by `write()` piled up in /tmp run after run.)
    public func withFile<Result>(_ body: (String) throws -> Result) throws -> Result {
        let path = try write()
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try body(path)
    }
}

extension SyntheticGGUF {
    /// A tiny Llama-family model with random fp32 weights (fake: for shape and
    /// consistency tests, not for output quality): `layers` layers, hidden 64,
    /// 4 heads of 16 with 2 KV heads, feed-forward 128, a 48-token byte vocabulary.
    public static func tinyLlama(layers: Int = 2, seed: UInt64 = 11) -> SyntheticGGUF {
        let (hidden, heads, kvHeads, feedForward) = (64, 4, 2, 128)
        let vocabulary = 48
        var gguf = SyntheticGGUF()
        let tokens = (0..<vocabulary).map { String(UnicodeScalar(UInt8(65 + $0 % 58))) + ($0 >= 58 ? "x" : "") }
        gguf.metadata = [
            ("general.architecture", .string("llama")),
            ("llama.block_count", .uint32(UInt32(layers))),
            ("llama.embedding_length", .uint32(UInt32(hidden))),
            ("llama.feed_forward_length", .uint32(UInt32(feedForward))),
            ("llama.attention.head_count", .uint32(UInt32(heads))),
            ("llama.attention.head_count_kv", .uint32(UInt32(kvHeads))),
            ("llama.context_length", .uint32(256)),
            ("llama.rope.freq_base", .float32(10000)),
            ("llama.attention.layer_norm_rms_epsilon", .float32(1e-5)),
            ("tokenizer.ggml.model", .string("gpt2")),
            ("tokenizer.ggml.tokens", .array(tokens.map { .string($0) })),
            ("tokenizer.ggml.merges", .array([])),
        ]
        var generator = SplitMix64(seed: seed)
        func matrix(_ name: String, rows: Int, columns: Int, scale: Float) -> Tensor {
            let values = (0..<(rows * columns)).map { _ in (generator.nextUnitFloat() - 0.5) * scale }
            return Tensor(name: name, dimensions: columns == 1 ? [rows] : [columns, rows], typeID: 0,
                          data: values.flatMap { value in withUnsafeBytes(of: value.bitPattern.littleEndian) { Array($0) } })
        }
        func norm(_ name: String) -> Tensor {
            let values = (0..<hidden).map { _ in 0.8 + 0.4 * generator.nextUnitFloat() }
            return Tensor(name: name, dimensions: [hidden], typeID: 0,
                          data: values.flatMap { value in withUnsafeBytes(of: value.bitPattern.littleEndian) { Array($0) } })
        }
        let kvWidth = kvHeads * hidden / heads
        gguf.tensors = [matrix("token_embd.weight", rows: vocabulary, columns: hidden, scale: 2)]
        for layer in 0..<layers {
            let prefix = "blk.\(layer)."
            gguf.tensors += [
                norm(prefix + "attn_norm.weight"),
                matrix(prefix + "attn_q.weight", rows: hidden, columns: hidden, scale: 0.5),
                matrix(prefix + "attn_k.weight", rows: kvWidth, columns: hidden, scale: 0.5),
                matrix(prefix + "attn_v.weight", rows: kvWidth, columns: hidden, scale: 0.5),
                matrix(prefix + "attn_output.weight", rows: hidden, columns: hidden, scale: 0.3),
                norm(prefix + "ffn_norm.weight"),
                matrix(prefix + "ffn_gate.weight", rows: feedForward, columns: hidden, scale: 0.5),
                matrix(prefix + "ffn_up.weight", rows: feedForward, columns: hidden, scale: 0.5),
                matrix(prefix + "ffn_down.weight", rows: hidden, columns: feedForward, scale: 0.3),
            ]
        }
        gguf.tensors.append(norm("output_norm.weight"))
        return gguf
    }
}

extension SyntheticGGUF {
    /// A tiny decoder of family `architecture` with random fp32 weights (fake, like ``tinyLlama(layers:seed:)``) and
    /// the tensors and keys that family reads: Q/K/V biases (qwen2), per-head Q/K norms (qwen3, gemma3), post-norms
    /// and a sliding window of `slidingWindow` positions on every layer but the last of each 6 (gemma3; nil: no
    /// window). Heads are `headDim` wide, so the queries (4 heads) need not be the hidden width (64).
    public static func tinyDecoder(_ architecture: String, layers: Int = 2, headDim: Int = 32, slidingWindow: Int? = nil,
                                   seed: UInt64 = 11) -> SyntheticGGUF {
        var gguf = tinyLlama(layers: layers, seed: seed)
        let (hidden, heads, kvHeads, feedForward) = (64, 4, 2, 128)
        let (queries, kvWidth) = (heads * headDim, kvHeads * headDim)
        gguf.metadata = gguf.metadata.map { key, value in
            (key.hasPrefix("llama.") ? architecture + key.dropFirst("llama".count) : key, key == "general.architecture" ? .string(architecture) : value)
        }
        gguf.metadata.append(("\(architecture).attention.key_length", .uint32(UInt32(headDim))))
        gguf.metadata.append(("\(architecture).attention.value_length", .uint32(UInt32(headDim))))
        if let slidingWindow {
            gguf.metadata.append(("\(architecture).attention.sliding_window", .uint32(UInt32(slidingWindow))))
            gguf.metadata.append(("\(architecture).rope.freq_base_swa", .float32(10000)))
        }
        var generator = SplitMix64(seed: seed &+ 1)
        func floats(_ count: Int, _ make: () -> Float) -> [UInt8] {
            (0..<count).map { _ in make() }.flatMap { value in withUnsafeBytes(of: value.bitPattern.littleEndian) { Array($0) } }
        }
        func vector(_ name: String, _ count: Int, around center: Float, spread: Float) -> Tensor {
            Tensor(name: name, dimensions: [count], typeID: 0, data: floats(count) { center + spread * (generator.nextUnitFloat() - 0.5) })
        }
        func matrix(_ name: String, rows: Int, columns: Int, scale: Float) -> Tensor {
            Tensor(name: name, dimensions: [columns, rows], typeID: 0, data: floats(rows * columns) { (generator.nextUnitFloat() - 0.5) * scale })
        }
        var tensors = gguf.tensors.filter { !$0.name.contains("attn_q.") && !$0.name.contains("attn_k.") && !$0.name.contains("attn_v.") && !$0.name.contains("attn_output.") }
        for layer in 0..<layers {
            let prefix = "blk.\(layer)."
            tensors += [matrix(prefix + "attn_q.weight", rows: queries, columns: hidden, scale: 0.5),
                        matrix(prefix + "attn_k.weight", rows: kvWidth, columns: hidden, scale: 0.5),
                        matrix(prefix + "attn_v.weight", rows: kvWidth, columns: hidden, scale: 0.5),
                        matrix(prefix + "attn_output.weight", rows: hidden, columns: queries, scale: 0.3)]
            if architecture == "qwen2" {
                tensors += [vector(prefix + "attn_q.bias", queries, around: 0, spread: 0.2), vector(prefix + "attn_k.bias", kvWidth, around: 0, spread: 0.2),
                            vector(prefix + "attn_v.bias", kvWidth, around: 0, spread: 0.2)]
            }
            if architecture == "qwen3" || architecture == "gemma3" {
                tensors += [vector(prefix + "attn_q_norm.weight", headDim, around: 1, spread: 0.4),
                            vector(prefix + "attn_k_norm.weight", headDim, around: 1, spread: 0.4)]
            }
            if architecture == "gemma3" {
                tensors += [vector(prefix + "post_attention_norm.weight", hidden, around: 1, spread: 0.4),
                            vector(prefix + "post_ffw_norm.weight", hidden, around: 1, spread: 0.4)]
            }
        }
        _ = feedForward
        gguf.tensors = tensors
        return gguf
    }
}
