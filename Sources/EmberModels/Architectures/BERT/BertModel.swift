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

    var architecture: String { "bert" }
    var path: String { directory }
    var dimension: Int { config.hidden }
    var maxSequenceLength: Int { config.maxSequenceLength }
    func tokenize(_ text: String) -> [Int] { tokenizer.encode(text) }

    /// Loads the model in `directory` (a sentence-transformers folder), into `context`.
    init(directory: String, context: ComputeContext) throws {
        self.directory = directory
        self.context = context
        func json(_ name: String) throws -> [String: Any] {
            let path = (directory as NSString).appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ModelFileError.unreadable(file: path, reason: "missing or unreadable")
            }
            guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
                throw ModelFileError.invalidField(file: path, field: "(root)", found: "not a JSON object", expected: "a JSON object")
            }
            return object
        }
        let configPath = (directory as NSString).appendingPathComponent("config.json")
        let settings = try json("config.json")
        func integer(_ key: String, in object: [String: Any] = settings, file: String = configPath, range: ClosedRange<Int>) throws -> Int {
            guard let value = (object[key] as? NSNumber)?.intValue, range.contains(value) else {
                throw ModelFileError.invalidField(file: file, field: key, found: "\(object[key] ?? "missing")", expected: "an integer in \(range)")
            }
            return value
        }
        let modelType = settings["model_type"] as? String ?? "?"
        guard modelType == "bert" else {
            throw ModelFileError.invalidField(file: configPath, field: "model_type", found: modelType, expected: "bert")
        }
        guard (settings["hidden_act"] as? String ?? "gelu") == "gelu" else {
            throw ModelFileError.invalidField(file: configPath, field: "hidden_act", found: "\(settings["hidden_act"]!)", expected: "gelu")
        }
        let sentenceConfigPath = (directory as NSString).appendingPathComponent("sentence_bert_config.json")
        let sentenceConfig = (try? json("sentence_bert_config.json")) ?? [:]
        let maxPositions = try integer("max_position_embeddings", range: 2...65_536)
        var config = Config(
            layers: try integer("num_hidden_layers", range: 1...256), hidden: try integer("hidden_size", range: 16...16_384),
            heads: try integer("num_attention_heads", range: 1...256), intermediate: try integer("intermediate_size", range: 16...65_536),
            vocabulary: try integer("vocab_size", range: 10...10_000_000), maxPositions: maxPositions,
            typeVocabulary: try integer("type_vocab_size", range: 1...16),
            layerNormEpsilon: Float((settings["layer_norm_eps"] as? NSNumber)?.doubleValue ?? 1e-12),
            maxSequenceLength: maxPositions)
        if sentenceConfig["max_seq_length"] != nil {
            config.maxSequenceLength = try integer("max_seq_length", in: sentenceConfig, file: sentenceConfigPath, range: 2...maxPositions)
        }
        guard config.hidden % config.heads == 0, config.headDim <= 512, config.hidden % 32 == 0, config.intermediate % 32 == 0 else {
            throw ModelFileError.invalidField(file: configPath, field: "hidden_size", found: "\(config.hidden) for \(config.heads) heads, intermediate \(config.intermediate)",
                                              expected: "multiples of 32 with a head size of at most 512")
        }
        self.config = config
        let pooling = (try? json("1_Pooling/config.json")) ?? ["pooling_mode_mean_tokens": true]
        guard pooling["pooling_mode_mean_tokens"] as? Bool == true, pooling["pooling_mode_cls_token"] as? Bool != true,
              pooling["pooling_mode_max_tokens"] as? Bool != true else {
            throw ModelFileError.invalidField(file: (directory as NSString).appendingPathComponent("1_Pooling/config.json"),
                                              field: "pooling_mode_mean_tokens", found: "another pooling", expected: "mean pooling")
        }
        let modules = (try? String(contentsOfFile: (directory as NSString).appendingPathComponent("modules.json"), encoding: .utf8)) ?? ""
        normalizes = modules.isEmpty || modules.contains("Normalize")
        tokenizer = try WordPiece(tokenizerJSON: (directory as NSString).appendingPathComponent("tokenizer.json"),
                                  maxLength: config.maxSequenceLength)
        let file = try SafetensorsFile(path: (directory as NSString).appendingPathComponent("model.safetensors"))
        self.file = file

        var owned: [UnsafeMutablePointer<Float>] = []
        func vector(_ name: String, _ shape: [Int]) throws -> UnsafePointer<Float> {
            let values = try file.floats(name, shape: shape)
            let copy = UnsafeMutablePointer<Float>.allocate(capacity: max(1, values.count))
            copy.initialize(from: values, count: values.count)
            owned.append(copy)
            return UnsafePointer(copy)
        }
        func linear(_ prefix: String, rows: Int, columns: Int) throws -> Linear {
            let values = try vector(prefix + ".weight", [rows, columns])
            let weights = try WeightMatrix(type: .f32, rows: rows, columns: columns,
                                           borrowing: UnsafeRawBufferPointer(start: values, count: rows * columns * 4), owner: nil)
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
        let largestID = tokenizer.vocabulary.values.max() ?? 0
        if largestID >= config.vocabulary {
            throw ModelFileError.invalidField(file: configPath, field: "vocab_size", found: "\(config.vocabulary)",
                                              expected: "more than the tokenizer's largest id \(largestID)")
        }
    }

    deinit { for vector in owned { vector.deallocate() } }
}
