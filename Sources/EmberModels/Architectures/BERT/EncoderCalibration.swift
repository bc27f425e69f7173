import EmberCore
import Foundation

/// What the int8 encoder measures once, at fp32, to quantize each activation row at one scale without losing its
/// small columns to a few large ones: the largest |value| of every column of each layer's matmul inputs over a few
/// sentences, and the smoothing derived from them (as SmoothQuant does: the activations' columns multiplied by c,
/// the weights' columns divided by it, so the product is unchanged and both sides quantize well).
///
/// Chosen on a numpy model of the encoder (statistics from 10 of the 20 public sentences, min cosine to
/// sentence-transformers on the other 10): one scale per 32 values on both sides (Q8_0 blocks) 0.9995; one per row
/// 0.9961; one per row with this smoothing 0.9979, and 0.9991 with the feed-forward output projection — whose GELU
/// input smoothing does not tame — kept at one scale per block (the choice; without smoothing that mix 0.9971). In
/// Ember, statistics from ``texts`` and all 20 public sentences held out: min / mean cosine 0.99916 / 0.99955 →
/// 0.99853–0.99861 / 0.99935 with VNNI, 0.99800 / 0.99909 → 0.99725 / 0.99858 with seven-bit weights (AVX2 without VNNI);
/// ONNX Runtime's int8 model, the peer, 0.9860 / 0.9916 on the same sentences.
struct EncoderCalibration {
    /// [layer][slot][column]: the largest |value| over ``texts`` (slots as ``EncoderPass/observer`` numbers them).
    let maxima: [[[Float]]]

    /// The sentences measured: written for Ember, varied in subject, length, numbers and punctuation, so that the
    /// statistics are the model's and not one text's.
    static let texts: [String] = [
        "The battery was at twelve percent, so the phone deferred the photo backup until it was charging again.",
        "How many kilometres is it from Lisbon to Porto by train, and does the 7:40 service stop in Coimbra?",
        "She planted tomatoes, basil and two rows of beans before the first frost of October.",
        "Quarterly revenue rose 4.3% to $18.2 billion, beating analysts' expectations despite weaker demand in Europe.",
        "A thread that holds a lock while it waits for a slower thread can stall the whole user interface.",
        "Mix the flour with a pinch of salt, add the eggs one at a time and knead for ten minutes.",
        "The committee postponed its vote; several members asked for an independent review of the figures.",
        "Why do cats knock things off tables?",
        "In 1969 two astronauts walked on the Moon while a third orbited above them in the command module.",
        "Error: the configuration file could not be read (permission denied) — check the path and try again.",
        "The river flooded the lower streets overnight, and volunteers spent the morning filling sandbags.",
        "Neural networks learn by adjusting millions of weights to reduce the error on their training examples.",
    ]

    /// α of the smoothing: c = √(weight range / activation range) per column (α = 0.5) measured best of 0.3–0.8.
    static let strength: Float = 0.5

    /// The activation column scales c for `slot` of `layer`, against the weights [N, K] that read it (Q, K and V
    /// share theirs): c_j = (max_i |W_ij|)^(1−α) / (max |x_j|)^α, each range floored at 1 % of its largest so that a
    /// column quiet in the calibration cannot get an enormous multiplier.
    func columnScales(layer: Int, slot: Int, weights: [Tensor]) throws -> Tensor {
        let activation = maxima[layer][slot]
        let columns = activation.count
        var weightRange = [Float](repeating: 0, count: columns)
        for matrix in weights {
            guard matrix.rank == 2, matrix.shape[1] == columns else {
                throw TensorError.shapeMismatch(argument: "weights", expected: "[N, \(columns)]", found: matrix.shape)
            }
            try matrix.withUnsafeBufferPointer { values in
                for row in 0..<matrix.shape[0] {
                    for j in 0..<columns { weightRange[j] = max(weightRange[j], abs(values[row * columns + j])) }
                }
            }
        }
        let activationFloor = max((activation.max() ?? 0) / 100, .leastNormalMagnitude)
        let weightFloor = max((weightRange.max() ?? 0) / 100, .leastNormalMagnitude)
        let alpha = Self.strength
        let scales = (0..<columns).map { j in
            pow(max(weightRange[j], weightFloor), 1 - alpha) / pow(max(activation[j], activationFloor), alpha)
        }
        return try Tensor(shape: [columns], values: scales)
    }

    /// `weights` [N, K] with each column j divided by `scales[j]`: what multiplies activations multiplied by them.
    static func dividingColumns(_ weights: Tensor, by scales: Tensor) throws -> Tensor {
        let (rows, columns) = (weights.shape[0], weights.shape[1])
        var out = [Float](repeating: 0, count: rows * columns)
        try weights.withUnsafeBufferPointer { w in
            try scales.withUnsafeBufferPointer { c in
                for row in 0..<rows {
                    for j in 0..<columns { out[row * columns + j] = w[row * columns + j] / c[j] }
                }
            }
        }
        return try Tensor(shape: [rows, columns], values: out)
    }
}

/// The running maxima an observed pass fills.
final class ColumnMaxima: @unchecked Sendable {
    private(set) var values: [[[Float]]]

    init(layers: Int) { values = Array(repeating: Array(repeating: [], count: 3), count: layers) }

    func record(layer: Int, slot: Int, _ data: UnsafePointer<Float>, rows: Int, width: Int) {
        var maxima = values[layer][slot].isEmpty ? [Float](repeating: 0, count: width) : values[layer][slot]
        for row in 0..<rows {
            for j in 0..<width { maxima[j] = max(maxima[j], abs(data[row * width + j])) }
        }
        values[layer][slot] = maxima
    }
}

extension BertModel {
    /// The encoder's calibration (measured on first use, then kept): one fp32 pass over ``EncoderCalibration/texts``
    /// on one thread, on whatever units the registry places fp32 best (BLAS on the GPU route here), its plan bound apart
    /// from the cached ones.
    func calibration() throws -> EncoderCalibration {
        try calibrationLock.withLock {
            if let calibrated { return calibrated }
            let plan = try EncoderPlan(model: self, key: EncoderPlanKey(units: .all, precision: .fp32,
                                                                        generation: context.backends.generation))
            let sentences = EncoderCalibration.texts.map { tokenizer.encode($0) }
            var starts: [Int] = [], rows = 0
            for ids in sentences {
                starts.append(rows)
                rows += ids.count
            }
            let workspace = EncoderWorkspace(config: config, rows: rows, threads: 1, preparedBytes: plan.preparedBytes)
            let pass = EncoderPass(model: self, plan: plan, workspace: workspace, sentences: sentences, starts: starts)
            let maxima = ColumnMaxima(layers: layers.count)
            pass.observer = { layer, slot, values, rows, width in maxima.record(layer: layer, slot: slot, values, rows: rows, width: width) }
            context.pool.region(threads: 1, qos: .current) { pass.run(on: $0) }
            if let failure = pass.stages.failure.error { throw failure }
            let made = EncoderCalibration(maxima: maxima.values)
            calibrated = made
            return made
        }
    }
}
