import CKernels
import Foundation

/// Buffers a model's forward pass reuses: prepared (quantized) activations
/// shared by the threads of a region, and for stages of only a few rows a
/// private input and preparation per thread.
final class StageBuffers {
    /// Shared prepared activations, one area per distinct preparation of a stage.
    let prepared: [UnsafeMutableRawPointer]
    /// Per thread: a private input of `privateRows` rows and its preparations.
    let privateInput: [UnsafeMutablePointer<Float>]
    let privatePrepared: [[UnsafeMutableRawPointer]]
    /// Bytes of each shared and each private preparation area.
    let preparedBytes: Int
    let privatePreparedBytes: Int
    private let arena = BufferArena()

    /// Stages of at most this many rows are made by every thread for itself (no barrier).
    static let privateRows = 4
    static let maxPreparations = 3

    init(rows: Int, width: Int, threads: Int) {
        let raw = arena.raw
        // Activation blocks cover whole 32-column blocks: sized from the width rounded up, never 0.
        let blockWidth = (width + 31) / 32 * 32
        let sharedBytes = ek_activation_size(Int64(max(1, rows)), Int64(blockWidth))
        let privateBytes = ek_activation_size(Int64(Self.privateRows), Int64(blockWidth))
        precondition(sharedBytes > 0 && privateBytes > 0, "stage buffers of \(rows) rows × \(width)")
        preparedBytes = sharedBytes
        privatePreparedBytes = privateBytes
        prepared = (0..<Self.maxPreparations).map { _ in raw(sharedBytes) }
        privateInput = (0..<threads).map { _ in raw(Self.privateRows * width * 4).bindMemory(to: Float.self, capacity: Self.privateRows * width) }
        privatePrepared = (0..<threads).map { _ in (0..<Self.maxPreparations).map { _ in raw(privateBytes) } }
    }
}

/// The input of a group of matmuls that share it: fp32 rows, and per matmul its prepared activations.
struct StageInput {
    var x: UnsafePointer<Float>
    var prepared: (UnsafeRawPointer?, UnsafeRawPointer?, UnsafeRawPointer?)

    subscript(index: Int) -> UnsafeRawPointer? {
        switch index {
        case 0: prepared.0
        case 1: prepared.1
        default: prepared.2
        }
    }
}

/// The first failure of any thread of a pass.
final class PassFailure: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var error: KernelError?

    func record(_ failure: KernelError) {
        lock.withLock { if error == nil { error = failure } }
    }
}

/// What every forward pass does from inside its region: make a stage's
/// input once per preparation, run a thread's share of a bound matmul, add
/// a bias to the columns it wrote.
struct PassStages {
    let buffers: StageBuffers
    let failure: PassFailure

    /// Makes a stage's input, from `source` or by `produce` writing rows into `shared`, and prepares
    /// it once per distinct preparation. A few rows: every thread makes its own private copy (no
    /// barrier). More: the threads split the rows into shared buffers, then meet at a barrier.
    func stage(_ thread: RegionThread, width: Int, rows: Int, group: [BoundMatmul], source: UnsafeMutablePointer<Float>? = nil,
               into shared: UnsafeMutablePointer<Float>? = nil,
               produce: ((Range<Int>, UnsafeMutablePointer<Float>) -> Void)? = nil) -> StageInput {
        let isPrivate = rows <= StageBuffers.privateRows
        let part = isPrivate ? 0..<rows : thread.share(of: rows)
        var x = source
        if x == nil, let produce {
            let out = isPrivate ? buffers.privateInput[thread.index] : shared!
            produce(part, out)
            x = out
        }
        let input = UnsafePointer(x!)
        var prepared: [UnsafeRawPointer?] = [nil, nil, nil]
        var kinds: [(ActivationPreparation, UnsafeRawPointer)] = []
        for (index, matmul) in group.enumerated() {
            guard let preparation = matmul.preparation else { continue }
            if let known = kinds.first(where: { $0.0 == preparation }) {
                prepared[index] = known.1
                continue
            }
            let area = isPrivate ? buffers.privatePrepared[thread.index][kinds.count] : buffers.prepared[kinds.count]
            let offset = ek_activation_size(Int64(part.lowerBound), Int64(width))
            if !part.isEmpty {
                let capacity = (isPrivate ? buffers.privatePreparedBytes : buffers.preparedBytes) - offset
                let status = preparation.prepare(input + part.lowerBound * width, rows: part.count, columns: width,
                                                 into: area + offset, capacity: capacity)
                if status != EK_OK { failure.record(matmul.failure(Int32(bitPattern: status.rawValue))) }
            }
            kinds.append((preparation, UnsafeRawPointer(area)))
            prepared[index] = UnsafeRawPointer(area)
        }
        if !isPrivate && (source == nil || !kinds.isEmpty) { thread.barrier() }
        return StageInput(x: input, prepared: (prepared[0], prepared[1], prepared[2]))
    }

    /// This thread's share of the weight rows of `matmul`; returns the rows (output columns) it wrote.
    @discardableResult
    func matmul(_ thread: RegionThread, _ matmul: BoundMatmul, _ input: StageInput, _ slot: Int, rows: Int,
                into y: UnsafeMutablePointer<Float>) -> Range<Int> {
        let range = matmul.splittable ? thread.share(of: matmul.rows, alignment: 16) : (thread.index == 0 ? 0..<matmul.rows : 0..<0)
        let status = matmul.run(input.x, prepared: input[slot], m: rows, into: y, rows: range)
        if status != 0 { failure.record(matmul.failure(status)) }
        return range
    }

    /// x[:, columns] += addend[:, columns] (both row stride `width`) for `rows` rows: a residual
    /// added over the output columns this thread just computed.
    func addResidual(_ addend: UnsafePointer<Float>, to x: UnsafeMutablePointer<Float>, width: Int, rows: Int, columns: Range<Int>) {
        add(bias: nil, residual: addend, to: x, width: width, rows: rows, columns: columns)
    }

    /// x[:, columns] += bias[columns] (if any) + residual[:, columns] (if any), row stride `width`,
    /// over the output columns this thread just computed.
    func add(bias: UnsafePointer<Float>?, residual: UnsafePointer<Float>?, to x: UnsafeMutablePointer<Float>,
             width: Int, rows: Int, columns: Range<Int>) {
        guard !columns.isEmpty else { return }
        ek_add_bias_rows(x, Int64(width), bias, residual, Int64(width), Int64(rows), Int64(columns.lowerBound), Int64(columns.upperBound))
    }
}

/// A model's weight matrices bound at once: binding packs, requantizes or
/// dequantizes, so the matrices are bound on every core, largest first.
/// Also where the pass runs (the unit with most of the arithmetic) and how
/// much arithmetic a token takes.
struct BoundMatmuls {
    let all: [BoundMatmul]
    /// The unit that runs most of the arithmetic; a pass runs on its execution resource.
    let route: ComputeUnit
    /// Multiply-adds ×2 of the matmuls, per token.
    let operationsPerToken: Double

    init(_ sources: [WeightMatrix], bind: (Int, WeightMatrix) throws -> BoundMatmul) throws {
        let order = sources.indices.sorted { sources[$0].bytes.count > sources[$1].bytes.count }
        let results = ResultSlots<BoundMatmul>(count: sources.count)
        WorkerPool.shared.parallelFor(order.count, qos: .current) { part in
            let index = order[part]
            results.set(index, Result { try bind(index, sources[index]) })
        }
        all = try results.values()
        var work: [ComputeUnit: Double] = [:]
        for matmul in all { work[matmul.placement.unit, default: 0] += 2 * Double(matmul.rows) * Double(matmul.columns) }
        route = work.max { $0.value < $1.value }?.key ?? .cpu
        operationsPerToken = work.values.reduce(0, +)
    }
}

/// One result per index, filled from several threads.
final class ResultSlots<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var slots: [Result<Value, Error>?]

    init(count: Int) { slots = Array(repeating: nil, count: count) }

    func set(_ index: Int, _ result: Result<Value, Error>) { lock.withLock { slots[index] = result } }

    /// Every value in order, or the first error by index.
    func values() throws -> [Value] { try lock.withLock { slots }.map { try $0!.get() } }
}
