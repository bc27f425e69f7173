import EmberCore
import EmberModels
import Foundation

/// Measures a model's ``QualityProfile``: a generator's perplexity on a built-in text at every precision against
/// fp32's (llama-perplexity's protocol, chunks of 128 tokens, the second half of each scored), an embedder's
/// vectors for built-in sentences against fp32's (mean cosine). Run when a model is first loaded on a machine kind
/// and cached by file checksum and kernel ISA (``QualityCache``); the model's bound copies are released afterwards.
public enum QualityProbe {
    /// Tokens per perplexity chunk.
    public static let contextLength = 128

    /// The version of the recipes that make a model's int8 and int4 weights (which roles and layers stay at 8 bits,
    /// how scales are searched): part of the cache key, so a cached profile never outlives the recipe it measured.
    /// 2: MiniLM's int4 keeps ffn_up at int8 in its middle layers. 3: fp16 (F16 weights) measured too. 4: a generator's
    /// loss from the KL divergence to fp32, not the perplexity ratio. 5: int4 keeps a 4-bit mix's types as stored.
    public static let recipeVersion = 5

    /// The cache key of the model at `path` (a file, or a folder whose `model.safetensors` is hashed) on `isa`:
    /// "checksum|bytes|isa|recipes N", the checksum a 64-bit multiply-rotate hash of every 8-byte word of the file (fast — about
    /// 0.1 s for 250 MB — and not cryptographic: it tells files apart, it does not authenticate them); nil when the
    /// file cannot be read.
    public static func key(path: String, isa: String) -> String? {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { return nil }
        let file = isFolder.boolValue ? (path as NSString).appendingPathComponent("model.safetensors") : path
        // Mapped as the loaders map it: a FIFO or a device has no key (and is not waited on or read without end).
        guard let data = try? MappedFile(path: file) else { return nil }
        let hash = { (bytes: UnsafeRawBufferPointer) -> UInt64 in
            var hash: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes.count)
            let words = bytes.count / 8
            for index in 0..<words {
                let word = bytes.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self)
                hash = ((hash ^ word) &* 0xFF51_AFD7_ED55_8CCD)
                hash = (hash << 29) | (hash >> 35)
            }
            for index in (words * 8)..<bytes.count { hash = (hash ^ UInt64(bytes[index])) &* 0xC4CE_B9FE_1A85_EC53 }
            return hash
        }(data.bytes)
        return String(format: "%016llx|%d|", hash, data.bytes.count) + isa + "|recipes \(recipeVersion)"
    }

    /// The generator's loss per precision: the perplexity rise at fp16, int8 and int4 that their distance from fp32
    /// predicts, exp(mean KL(fp32 ‖ precision)) − 1 over the text's scored tokens — what the perplexity ratio comes to
    /// on text written as fp32 would write it. The ratio of the two perplexities on the text itself would be the direct
    /// measure, but on the probe's ~126 scored tokens its standard error is about ±1 % (SmolLM2's int8 measured +1.42 %
    /// here and +0.29 % on 1,020 tokens of another text), where the budgets it is held to are +0.5 % to +5 %; the mean
    /// KL divergence over the same tokens is known to ±5–8 % of itself.
    public static func measure(_ model: any TextGenerator, threads: Int) throws -> QualityProfile {
        func options(_ precision: Precision) -> ExecutionOptions {
            ExecutionOptions(units: .all, precision: precision, threads: threads, qos: .utility)
        }
        defer { model.releaseBoundWeights() }
        let measured: [Precision] = [.fp16, .int8, .int4]
        let results = try Perplexity.evaluate(model, text: text, contextLength: min(contextLength, model.contextLength),
                                              runs: measured.map(options), reference: options(.fp32))
        var loss: [Precision: Double] = [:]
        for (precision, result) in zip(measured, results) { loss[precision] = expm1(result.divergence?.meanKL ?? 0) }
        return QualityProfile(metric: "perplexity", loss: loss, reference: results[0].divergence?.referencePerplexity ?? 0,
                              source: "measured (KL divergence from fp32 over \(results[0].tokens) tokens)")
    }

    /// The embedder's loss per precision: 1 − the mean cosine between its vectors and fp32's for the built-in sentences.
    public static func measure(_ model: any Embedder, threads: Int) throws -> QualityProfile {
        func vectors(_ precision: Precision) throws -> [[Float]] {
            try model.embed(sentences, options: ExecutionOptions(units: .all, precision: precision, threads: threads, qos: .utility)).embeddings
        }
        defer { model.releaseBoundWeights() }
        let reference = try vectors(.fp32)
        var loss: [Precision: Double] = [:]
        for precision in [Precision.fp16, .int8, .int4] {
            let other = try vectors(precision)
            let cosines = zip(reference, other).map { cosineSimilarity($0, $1) }
            loss[precision] = 1 - cosines.reduce(0, +) / Double(max(1, cosines.count))
        }
        return QualityProfile(metric: "cosine", loss: loss, reference: 1, source: "measured (\(sentences.count) sentences)")
    }

    /// The generators' text: plain English prose written for this project, about 450 tokens.
    public static let text = """
        The harbour town woke slowly in winter. Before the bakery opened, the only light on the quay came from the \
        ferry office, where a clerk sorted the morning's parcels by island and by weight. Fishing boats that had gone \
        out in the dark returned one at a time, and their crews carried crates of mackerel and crab up the stone steps \
        to the market hall. By eight o'clock the school bus had made its first round, the post van was parked outside \
        the chemist, and the smell of bread had reached the end of the pier.

        Most of the people who lived there all year worked in more than one trade. The woman who ran the hardware shop \
        also kept the tide tables for the harbour master, and the mechanic who repaired outboard engines drove the \
        ambulance twice a week. In summer the population doubled, cafés stayed open late, and the ferry ran every hour; \
        in winter a storm could close the crossing for three days, and nobody thought that unusual.

        The old lighthouse on the headland no longer needed a keeper. Its lamp had been automated decades earlier and \
        was now checked by an engineer who visited each spring with a van full of spare parts. The keeper's cottage had \
        become a small museum with a logbook, a brass telescope, and photographs of shipwrecks that had happened before \
        the light was built. Children from the school walked there every autumn to draw the tower and count the steps, \
        which always came to one hundred and twelve no matter who did the counting.

        When the weather was clear, visitors could see three other islands from the top of the hill behind the church. \
        Each had its own harbour, its own shop, and its own opinion about which of them had the best view. Arguments \
        about this were friendly and never settled, and they usually ended with someone pointing out that the ferry \
        timetable mattered more than the scenery.
        """

    /// The embedders' sentences: short, varied, written for this project.
    public static let sentences = [
        "The ferry was cancelled because of the storm.",
        "A storm closed the crossing for three days.",
        "She repaired the outboard engine before noon.",
        "The bakery opens at six in the morning.",
        "Fresh bread is sold early at the harbour.",
        "The lighthouse lamp has been automated for decades.",
        "Children counted the steps of the tower.",
        "Interest rates rose for the third month in a row.",
        "The central bank raised borrowing costs again.",
        "He forgot his umbrella on the train.",
        "Photosynthesis turns light into chemical energy.",
        "Plants use sunlight to make sugar from carbon dioxide.",
        "The match was postponed after heavy rain.",
        "Rain delayed the football game until Sunday.",
        "My laptop battery drains quickly when the screen is bright.",
        "A brighter display uses more power.",
    ]
}
