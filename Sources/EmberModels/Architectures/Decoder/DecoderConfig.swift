import EmberCore
import Foundation

/// A decoder's shape, from the GGUF metadata, every number checked against
/// its bounds and against the tensors the file holds before anything is
/// allocated: a hostile or inconsistent file is a ``ModelFileError`` naming
/// the key, the value and what it disagrees with.
struct DecoderConfig: Sendable, Equatable {
    /// Number of decoder blocks (`ARCH.block_count`), equal to the `blk.N` tensors present.
    var layers: Int
    /// Width of the hidden states (`ARCH.embedding_length`).
    var hidden: Int
    /// Width of the feed-forward layer (`ARCH.feed_forward_length`).
    var feedForward: Int
    /// Query attention heads (`ARCH.attention.head_count`).
    var heads: Int
    /// Key/value heads (`ARCH.attention.head_count_kv`); fewer than `heads` under grouped-query attention.
    var kvHeads: Int
    /// Width of one attention head (`ARCH.attention.key_length`, else `hidden / heads`).
    var headDim: Int
    /// Number of token ids: the rows of `token_embd.weight`.
    var vocabulary: Int
    /// RoPE frequency base of the global layers (`ARCH.rope.freq_base`, the description's default when absent).
    var ropeBase: Float
    /// Linear RoPE scaling of the global layers: 1 / `ARCH.rope.scaling.factor` when its type is linear, else 1.
    var ropeFrequencyScale: Float
    /// Epsilon of the RMS norms (`ARCH.attention.layer_norm_rms_epsilon`, 1e-5 when absent).
    var rmsEpsilon: Float
    /// Tokens the model was trained to attend over (`ARCH.context_length`); sessions are capped at it.
    var contextLength: Int
    /// Positions a sliding layer attends over (`ARCH.attention.sliding_window`), nil without sliding layers.
    var slidingWindow: Int?
    /// Per layer, whether it slides (every layer false without a window).
    var slidingLayers: [Bool]
    /// RoPE base of the sliding layers (`ARCH.rope.freq_base_swa`, else the description's).
    var slidingRopeBase: Float
    /// What scores are scaled by: 1/√headDim.
    var attentionScale: Float
    /// Logits are `cap · tanh(logits / cap)` when set (`ARCH.final_logit_softcapping`).
    var finalLogitSoftcap: Float?

    /// Width of all query heads together.
    var queryWidth: Int { heads * headDim }
    /// Width of all key (or value) heads together.
    var kvWidth: Int { kvHeads * headDim }

    /// Bounds no real decoder comes near; a value beyond them is a broken or hostile file.
    static let maximumWidth = 1 << 17, maximumHeads = 1 << 10, maximumLayers = 1 << 12, maximumContext = 1 << 24

    init(file: GGUFFile, description: DecoderDescription) throws {
        func refuse(_ key: String, _ found: String, _ expected: String) -> ModelFileError {
            .invalidField(file: file.path, field: key, found: found, expected: expected)
        }
        func integer(_ name: String, default fallback: Int? = nil, in range: ClosedRange<Int>) throws -> Int {
            let key = description.key(name)
            guard let value = file.metadata[key] else {
                if let fallback { return fallback }
                throw refuse(key, "missing", "an integer in \(range.lowerBound)…\(range.upperBound)")
            }
            guard let number = value.integer, range.contains(number) else {
                throw refuse(key, value.summary, "an integer in \(range.lowerBound)…\(range.upperBound)")
            }
            return number
        }
        func real(_ name: String, default fallback: Float, in range: ClosedRange<Double>) throws -> Float {
            let key = description.key(name)
            guard let value = file.metadata[key] else { return fallback }
            guard let number = value.number, number.isFinite, range.contains(number), Float(number).isFinite, Float(number) > 0 else {
                throw refuse(key, value.summary, "a finite number in \(range.lowerBound)…\(range.upperBound)")
            }
            return Float(number)
        }

        hidden = try integer("embedding_length", in: 1...Self.maximumWidth)
        heads = try integer("attention.head_count", in: 1...Self.maximumHeads)
        kvHeads = try integer("attention.head_count_kv", default: heads, in: 1...heads)
        feedForward = try integer("feed_forward_length", in: 1...(Self.maximumWidth * 8))
        headDim = try integer("attention.key_length", default: hidden / heads, in: 2...512)
        let valueDim = try integer("attention.value_length", default: headDim, in: 1...512)
        contextLength = try integer("context_length", in: 1...Self.maximumContext)
        layers = try integer("block_count", in: 1...Self.maximumLayers)
        guard valueDim == headDim else {
            throw refuse(description.key("attention.value_length"), "\(valueDim)", "\(headDim), the key length (Ember's attention needs equal widths)")
        }
        guard heads % kvHeads == 0, headDim % 2 == 0 else {
            throw refuse(description.key("attention.head_count_kv"), "\(kvHeads) KV heads of \(headDim) for \(heads) heads",
                         "a divisor of the head count, and an even head width")
        }
        for (name, width) in [("embedding_length", hidden), ("feed_forward_length", feedForward), ("attention.head_count", heads * headDim)]
        where width % 32 != 0 {
            throw refuse(description.key(name), name == "attention.head_count" ? "\(heads) heads of \(headDim) (\(width) wide)" : "\(width)",
                         "widths that are multiples of 32 (whole quantization blocks)")
        }
        if let rotated = file.metadata[description.key("rope.dimension_count")] {
            guard rotated.integer == headDim else {
                throw refuse(description.key("rope.dimension_count"), rotated.summary, "\(headDim), the head width (Ember rotates whole heads)")
            }
        }
        let present = Self.blocksPresent(file)
        guard present.count == layers, present.contiguous else {
            throw refuse(description.key("block_count"), "\(layers)",
                         present.contiguous ? "\(present.count), the number of blk.N tensor groups in the file"
                                            : "blk.0…blk.\(layers - 1) all present (the file's blk.N groups have gaps)")
        }
        vocabulary = try Self.vocabularySize(file)

        ropeBase = try real("rope.freq_base", default: description.defaultRopeBase, in: 1e-3...1e12)
        rmsEpsilon = try real("attention.layer_norm_rms_epsilon", default: 1e-5, in: 1e-12...0.1)
        ropeFrequencyScale = 1
        if let type = file.metadata[description.key("rope.scaling.type")]?.string, type != "none" {
            guard type == "linear" else {
                throw refuse(description.key("rope.scaling.type"), type, "linear or none (YaRN and others are not supported yet)")
            }
            ropeFrequencyScale = 1 / (try real("rope.scaling.factor", default: 1, in: 1e-3...1e6))
        }
        attentionScale = 1 / Float(headDim).squareRoot()
        let softcap = try real("final_logit_softcapping", default: 0, in: 0...1e6)
        finalLogitSoftcap = softcap > 0 ? softcap : nil

        slidingWindow = nil
        slidingLayers = Array(repeating: false, count: layers)
        slidingRopeBase = description.slidingWindow?.defaultRopeBase ?? ropeBase
        if let sliding = description.slidingWindow, file.metadata[description.key("attention.sliding_window")] != nil {
            let window = try integer("attention.sliding_window", in: 0...Self.maximumContext)
            if window > 0 {
                slidingWindow = window
                slidingLayers = try Self.slidingPattern(file, description: description, layers: layers, period: sliding.period)
                slidingRopeBase = try real("rope.freq_base_swa", default: sliding.defaultRopeBase, in: 1e-3...1e12)
            }
        }
    }

    /// Which layers slide: `ARCH.attention.sliding_window_pattern` as one flag per layer or as a period (the last
    /// layer of each period global), else the description's period.
    private static func slidingPattern(_ file: GGUFFile, description: DecoderDescription, layers: Int, period: Int) throws -> [Bool] {
        let key = description.key("attention.sliding_window_pattern")
        var period = period
        if let value = file.metadata[key] {
            if let flags = value.array {
                let bools = flags.compactMap(\.bool)
                guard bools.count == flags.count, bools.count == layers else {
                    throw ModelFileError.invalidField(file: file.path, field: key, found: "\(flags.count) values",
                                                      expected: "\(layers) Booleans, one per layer")
                }
                return bools
            }
            guard let number = value.integer, (0...maximumLayers).contains(number) else {
                throw ModelFileError.invalidField(file: file.path, field: key, found: value.summary, expected: "a period 0…\(maximumLayers)")
            }
            period = number
        }
        return (0..<layers).map { period == 0 || $0 % period < period - 1 }
    }

    /// The number of distinct `blk.N.` prefixes, and whether they are 0…count-1 with no gaps.
    private static func blocksPresent(_ file: GGUFFile) -> (count: Int, contiguous: Bool) {
        var indices = Set<Int>()
        for tensor in file.tensors where tensor.name.hasPrefix("blk.") {
            let rest = tensor.name.dropFirst(4)
            guard let dot = rest.firstIndex(of: "."), let index = Int(rest[..<dot]), index >= 0, index < maximumLayers else { continue }
            indices.insert(index)
        }
        return (indices.count, indices.count == (indices.max().map { $0 + 1 } ?? 0))
    }

    /// The token table's rows, checked to be a matrix first.
    private static func vocabularySize(_ file: GGUFFile) throws -> Int {
        let info = try file.tensor("token_embd.weight")
        guard info.dimensions.count == 2, info.dimensions[1] > 0 else {
            throw ModelFileError.invalidField(file: file.path, field: "tensors[token_embd.weight]", found: "\(info.dimensions)",
                                              expected: "2 dimensions [hidden, vocabulary]")
        }
        return info.dimensions[1]
    }
}
