import EmberCore
import Foundation

/// A BERT-family sentence encoder (all-MiniLM-L6-v2) from a
/// sentence-transformers folder: `config.json`, `model.safetensors`,
/// `tokenizer.json`, `1_Pooling/config.json`, `sentence_bert_config.json`.
/// Embeddings are the mean of the last hidden states over each sentence's
/// tokens, L2-normalised (as the pooling config says). Every op is placed on
/// a backend by the context's registry, so the units and precision decided apply.
final class BertModel: Embedder, @unchecked Sendable {
    /// The encoder's shape, from config.json and sentence_bert_config.json.
    struct Config: Sendable, Equatable {
        /// Number of encoder layers (`num_hidden_layers`).
        var layers: Int
        /// Width of the hidden states and of each embedding (`hidden_size`).
        var hidden: Int
        /// Attention heads per layer (`num_attention_heads`).
        var heads: Int
        /// Width of the feed-forward layer (`intermediate_size`).
        var intermediate: Int
        /// Number of token ids (`vocab_size`).
        var vocabulary: Int
        /// Number of learned position embeddings (`max_position_embeddings`).
        var maxPositions: Int
        /// Number of token-type (segment) embeddings (`type_vocab_size`).
        var typeVocabulary: Int
        /// Epsilon of the layer norms (`layer_norm_eps`, 1e-12 when absent).
        var layerNormEpsilon: Float
        /// Tokens per sentence at most ([CLS] and [SEP] included).
        var maxSequenceLength: Int
        /// Width of one attention head: `hidden / heads`.
        var headDim: Int { hidden / heads }
    }

    /// A linear layer: W [out × in] and its bias.
    struct Linear {
        let weights: WeightMatrix
        let bias: UnsafePointer<Float>
    }

    struct Layer {
        let query, key, value, attentionOutput, intermediate, output: Linear
        let attentionNormGamma, attentionNormBeta, outputNormGamma, outputNormBeta: UnsafePointer<Float>
    }

    /// The encoder's shape as read from the model folder.
    let config: Config
    /// The WordPiece tokenizer from `tokenizer.json`, truncating to `config.maxSequenceLength`.
    let tokenizer: WordPiece
    /// The sentence-transformers folder the model was loaded from.
    let directory: String
    /// Whether embeddings are L2-normalised: true when `modules.json` lists a Normalize module or is missing.
    let normalizes: Bool
    /// Where its ops run.
    let context: ComputeContext
    let file: SafetensorsFile
    let wordEmbeddings, positionEmbeddings, typeEmbeddings: UnsafePointer<Float>
    let embeddingNormGamma, embeddingNormBeta: UnsafePointer<Float>
    let layers: [Layer]
    private var owned: [UnsafeMutablePointer<Float>] = []
    let lock = NSLock()
    let plans = PlanCache<EncoderPlanKey, EncoderPlan>()
    var workspace: EncoderWorkspace?
    /// The int8 encoder's smoothing statistics, measured once (`calibration()`).
    let calibrationLock = NSLock()
    var calibrated: EncoderCalibration?

    var architecture: String { "bert" }
    var matmulParameters: Int {
        linears.reduce(0) { $0 + $1.weights.rows * $1.weights.columns }
    }

    /// Every linear layer, in order: each layer's query, key, value, attention output, intermediate and output.
    var linears: [Linear] {
        layers.flatMap { [$0.query, $0.key, $0.value, $0.attentionOutput, $0.intermediate, $0.output] }
    }

    func releaseBoundWeights() {
        plans.removeAll()
        lock.withLock { workspace = nil }
        for linear in linears { linear.weights.releaseDerivedCopies() }
    }
    var path: String { directory }
    var dimension: Int { config.hidden }
    var maxSequenceLength: Int { config.maxSequenceLength }
    func tokenize(_ text: String) -> [Int] { tokenizer.encode(text) }

    /// Loads the model in `directory` (a sentence-transformers folder), into `context`.
    init(directory: String, context: ComputeContext) throws {
        self.directory = directory
        self.context = context
        func path(_ name: String) -> String { (directory as NSString).appendingPathComponent(name) }
        let settings = try JSONFields.load(path("config.json"))!
        let modelType = try settings.string("model_type", default: "missing") ?? "missing"
        guard modelType == "bert" else {
            throw ModelFileError.invalidField(file: settings.file, field: "model_type", found: modelType, expected: "bert")
        }
        let activation = try settings.string("hidden_act", default: "gelu") ?? "gelu"
        guard activation == "gelu" else {
            throw ModelFileError.invalidField(file: settings.file, field: "hidden_act", found: activation, expected: "gelu")
        }
        let maxPositions = try settings.integer("max_position_embeddings", in: 2...65_536)
        var config = Config(
            layers: try settings.integer("num_hidden_layers", in: 1...256), hidden: try settings.integer("hidden_size", in: 16...16_384),
            heads: try settings.integer("num_attention_heads", in: 1...256), intermediate: try settings.integer("intermediate_size", in: 16...65_536),
            vocabulary: try settings.integer("vocab_size", in: 10...10_000_000), maxPositions: maxPositions,
            typeVocabulary: try settings.integer("type_vocab_size", in: 1...16),
            layerNormEpsilon: Float(try settings.real("layer_norm_eps", in: 1e-30...0.1, default: 1e-12)),
            maxSequenceLength: maxPositions)
        // Optional files: absent means the format's default; present but unreadable or wrongly typed is an error.
        if let sentence = try JSONFields.load(path("sentence_bert_config.json"), optional: true), sentence.object["max_seq_length"] != nil {
            config.maxSequenceLength = try sentence.integer("max_seq_length", in: 2...maxPositions)
        }
        guard config.hidden % config.heads == 0, config.headDim <= 512, config.hidden % 32 == 0, config.intermediate % 32 == 0 else {
            throw ModelFileError.invalidField(file: settings.file, field: "hidden_size", found: "\(config.hidden) for \(config.heads) heads, intermediate \(config.intermediate)",
                                              expected: "multiples of 32 with a head size of at most 512")
        }
        self.config = config
        if let pooling = try JSONFields.load(path("1_Pooling/config.json"), optional: true) {
            guard try pooling.bool("pooling_mode_mean_tokens", default: false), !(try pooling.bool("pooling_mode_cls_token", default: false)),
                  !(try pooling.bool("pooling_mode_max_tokens", default: false)) else {
                throw ModelFileError.invalidField(file: pooling.file, field: "pooling_mode_mean_tokens", found: "another pooling",
                                                  expected: "mean pooling (pooling_mode_mean_tokens true, the others false)")
            }
        }
        if FileManager.default.fileExists(atPath: path("modules.json")) {
            let data = try MappedFile.contents(ofSmallFile: path("modules.json"))
            guard (try? JSONSerialization.jsonObject(with: data)) is [Any] else {
                throw ModelFileError.invalidField(file: path("modules.json"), field: "(root)", found: "unreadable or not a JSON array",
                                                  expected: "a list of sentence-transformers modules")
            }
            normalizes = String(decoding: data, as: UTF8.self).contains("Normalize")
        } else {
            normalizes = true
        }
        tokenizer = try WordPiece(tokenizerJSON: (directory as NSString).appendingPathComponent("tokenizer.json"),
                                  maxLength: config.maxSequenceLength)
        let file = try SafetensorsFile(path: (directory as NSString).appendingPathComponent("model.safetensors"))
        self.file = file

        var owned: [UnsafeMutablePointer<Float>] = []
        func finiteFloats(_ name: String, _ shape: [Int]) throws -> [Float] {
            let values = try file.floats(name, shape: shape)
            // Every weight is copied to fp32 here, so checking them all for NaN and infinity costs little.
            guard values.allSatisfy(\.isFinite) else {
                throw ModelFileError.invalidField(file: file.path, field: "tensors[\(name)]", found: "a NaN or infinite value", expected: "finite weights")
            }
            return values
        }
        func vector(_ name: String, _ shape: [Int]) throws -> UnsafePointer<Float> {
            let values = try finiteFloats(name, shape)
            let copy = UnsafeMutablePointer<Float>.allocate(capacity: max(1, values.count))
            copy.initialize(from: values, count: values.count)
            owned.append(copy)
            return UnsafePointer(copy)
        }
        // The model's weight matrices and the int8/int4 copies made from them, on huge pages where the system has
        // them: MiniLM's matrices are 0.6-2.4 MB, and a sentence streams all 85 MB of them.
        let copyArena = HugePageArena()
        func linear(_ prefix: String, rows: Int, columns: Int) throws -> Linear {
            let weights = try finiteFloats(prefix + ".weight", [rows, columns]).withUnsafeBytes {
                try WeightMatrix(type: .f32, rows: rows, columns: columns, copying: $0, copyArena: copyArena)
            }
            return Linear(weights: weights, bias: try vector(prefix + ".bias", [rows]))
        }
        let (d, ff) = (config.hidden, config.intermediate)
        wordEmbeddings = try vector("embeddings.word_embeddings.weight", [config.vocabulary, d])
        positionEmbeddings = try vector("embeddings.position_embeddings.weight", [maxPositions, d])
        typeEmbeddings = try vector("embeddings.token_type_embeddings.weight", [config.typeVocabulary, d])
        embeddingNormGamma = try vector("embeddings.LayerNorm.weight", [d])
        embeddingNormBeta = try vector("embeddings.LayerNorm.bias", [d])
        layers = try (0..<config.layers).map { index in
            let prefix = "encoder.layer.\(index)."
            return Layer(
                query: try linear(prefix + "attention.self.query", rows: d, columns: d),
                key: try linear(prefix + "attention.self.key", rows: d, columns: d),
                value: try linear(prefix + "attention.self.value", rows: d, columns: d),
                attentionOutput: try linear(prefix + "attention.output.dense", rows: d, columns: d),
                intermediate: try linear(prefix + "intermediate.dense", rows: ff, columns: d),
                output: try linear(prefix + "output.dense", rows: d, columns: ff),
                attentionNormGamma: try vector(prefix + "attention.output.LayerNorm.weight", [d]),
                attentionNormBeta: try vector(prefix + "attention.output.LayerNorm.bias", [d]),
                outputNormGamma: try vector(prefix + "output.LayerNorm.weight", [d]),
                outputNormBeta: try vector(prefix + "output.LayerNorm.bias", [d]))
        }
        self.owned = owned
        let layerNames = Set(file.tensors.keys.compactMap { name -> Int? in
            guard name.hasPrefix("encoder.layer."), let index = Int(name.dropFirst("encoder.layer.".count).prefix { $0.isNumber }) else { return nil }
            return index
        })
        guard layerNames.count == config.layers else {
            throw ModelFileError.invalidField(file: settings.file, field: "num_hidden_layers", found: "\(config.layers)",
                                              expected: "\(layerNames.count), the encoder.layer.N tensor groups in model.safetensors")
        }
        let largestID = tokenizer.vocabulary.values.max() ?? 0
        if largestID >= config.vocabulary {
            throw ModelFileError.invalidField(file: settings.file, field: "vocab_size", found: "\(config.vocabulary)",
                                              expected: "more than the tokenizer's largest id \(largestID)")
        }
    }

    deinit { for vector in owned { vector.deallocate() } }
}
