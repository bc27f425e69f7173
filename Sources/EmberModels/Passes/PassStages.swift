import _CEmberKernels
import EmberCore
import Foundation

/// Buffers a model's forward pass reuses: prepared (quantized) activations
/// shared by the threads of a region, and for stages of only a few rows a
/// private input and preparation per thread.
final class StageBuffers {
    /// Shared prepared activations, one area per distinct preparation of a stage (``maxPreparations``).
    /// The tables are arena memory, not arrays: a decode step reads them on every thread without retaining.
    private let preparedAreas: UnsafeMutablePointer<UnsafeMutableRawPointer>
    /// Per thread: a private input of `privateRows` rows and its preparations (thread-major).
    private let privateInputs: UnsafeMutablePointer<UnsafeMutablePointer<Float>>
    private let privatePreparedAreas: UnsafeMutablePointer<UnsafeMutableRawPointer>
    private let threads: Int
    /// Bytes of each shared and each private preparation area.
    let preparedBytes: Int
    /// Bytes of a shared area per row, the most any preparation takes for a row of the widest width (areas are
    /// laid out row after row): a lane that owns its rows keeps them from its first row times this, so lanes at stages
    /// of different widths or preparations never overlap.
    let sharedRowBytes: Int
    let privatePreparedBytes: Int
    private let arena = BufferArena()
    /// Bytes of all the buffers.
    var byteCount: Int { arena.byteCount }

    /// Stages of at most this many rows are made by every thread for itself (no barrier).
    static let privateRows = 4
    static let maxPreparations = 3

    /// Bytes ``init(rows:width:threads:preparedBytes:)`` allocates when no preparation needs more than Ember's Q8
    /// activation blocks (every built-in one: Q8_0's and Q8_K's blocks, row-scaled or not).
    static func byteCount(rows: Int, width: Int, threads: Int) -> Int {
        let blockWidth = (width + 31) / 32 * 32
        let shared = Int(ek_activation_size(Int64(max(1, rows)), Int64(blockWidth)))
        let perThread = privateRows * width * 4 + maxPreparations * Int(ek_activation_size(Int64(privateRows), Int64(blockWidth)))
        let tables = (maxPreparations + max(1, threads) * (1 + maxPreparations)) * MemoryLayout<UnsafeMutableRawPointer>.stride
        return maxPreparations * shared + threads * perThread + tables
    }

    /// Buffers for stages of up to `rows` rows of up to `width` values, on `threads` threads; `preparedBytes(rows, width)`
    /// is the most any of the plan's preparations needs (Ember's Q8 blocks at least).
    init(rows: Int, width: Int, threads: Int, preparedBytes bytesNeeded: (Int, Int) -> Int) {
        let raw = arena.raw
        // Activation blocks cover whole 32-column blocks: sized from the width rounded up, never 0.
        let blockWidth = (width + 31) / 32 * 32
        let sharedBytes = max(bytesNeeded(max(1, rows), blockWidth), ek_activation_size(Int64(max(1, rows)), Int64(blockWidth)))
        let privateBytes = max(bytesNeeded(Self.privateRows, blockWidth), ek_activation_size(Int64(Self.privateRows), Int64(blockWidth)))
        precondition(sharedBytes > 0 && privateBytes > 0, "stage buffers of \(rows) rows × \(width)")
        preparedBytes = sharedBytes
        sharedRowBytes = sharedBytes / max(1, rows)
        privatePreparedBytes = privateBytes
        self.threads = threads
        let pointerBytes = MemoryLayout<UnsafeMutableRawPointer>.stride
        preparedAreas = raw(Self.maxPreparations * pointerBytes).bindMemory(to: UnsafeMutableRawPointer.self, capacity: Self.maxPreparations)
        for kind in 0..<Self.maxPreparations { (preparedAreas + kind).initialize(to: raw(sharedBytes)) }
        privateInputs = raw(max(1, threads) * pointerBytes).bindMemory(to: UnsafeMutablePointer<Float>.self, capacity: max(1, threads))
        let privateAreas = max(1, threads) * Self.maxPreparations
        privatePreparedAreas = raw(privateAreas * pointerBytes).bindMemory(to: UnsafeMutableRawPointer.self, capacity: privateAreas)
        for thread in 0..<threads {
            (privateInputs + thread).initialize(to: raw(Self.privateRows * width * 4).bindMemory(to: Float.self, capacity: Self.privateRows * width))
            for kind in 0..<Self.maxPreparations {
                (privatePreparedAreas + thread * Self.maxPreparations + kind).initialize(to: raw(privateBytes))
            }
        }
    }

    /// The shared area of preparation `kind` (0 ..< ``maxPreparations``).
    func prepared(_ kind: Int) -> UnsafeMutableRawPointer { preparedAreas[kind] }

    /// Thread `thread`'s private input.
    func privateInput(_ thread: Int) -> UnsafeMutablePointer<Float> {
        precondition(thread >= 0 && thread < threads, "stage buffers for \(threads) threads, thread \(thread)")
        return privateInputs[thread]
    }

    /// Thread `thread`'s private area of preparation `kind`.
    func privatePrepared(_ thread: Int, _ kind: Int) -> UnsafeMutableRawPointer {
        precondition(thread >= 0 && thread < threads && kind >= 0 && kind < Self.maxPreparations,
                     "stage buffers for \(threads) threads, thread \(thread) preparation \(kind)")
        return privatePreparedAreas[thread * Self.maxPreparations + kind]
    }
}

/// The input of a group of matmuls that share it: fp32 rows, and per matmul its prepared activations, which begin
/// with row `firstRow`'s.
struct StageInput {
    var x: UnsafePointer<Float>
    var prepared: (UnsafeRawPointer?, UnsafeRawPointer?, UnsafeRawPointer?)
    var firstRow = 0

    subscript(index: Int) -> UnsafeRawPointer? {
        get {
            switch index {
            case 0: prepared.0
            case 1: prepared.1
            default: prepared.2
            }
        }
        set {
            switch index {
            case 0: prepared.0 = newValue
            case 1: prepared.1 = newValue
            default: prepared.2 = newValue
            }
        }
    }
}

/// Up to ``StageBuffers/maxPreparations`` matmuls that read the same input, with their distinct activation
/// preparations found once: a plan makes its groups when it binds, so a decode step compares no preparation keys
/// and copies no matmul (their retains and the arrays were 9 % of an int4 token).
final class StageGroup: @unchecked Sendable {
    let matmuls: [BoundMatmul]
    /// The distinct preparations in order of first use, each with the first matmul that uses it (named in errors).
    let preparations: [(preparation: ActivationPreparation, user: Int)]
    /// `preparations`' preparations, called through without retaining (the matmuls keep them): a decode step
    /// prepares on every thread at once, and retains of shared objects there bounce their counts between the cores.
    let unretainedPreparations: [Unmanaged<ActivationPreparation>]
    /// Per matmul, the index in `preparations` of the one it reads; nil for a matmul of fp32 input.
    let slots: [Int?]

    init(_ matmuls: [BoundMatmul]) {
        precondition(!matmuls.isEmpty && matmuls.count <= StageBuffers.maxPreparations, "a stage of \(matmuls.count) matmuls")
        var preparations: [(preparation: ActivationPreparation, user: Int)] = []
        slots = matmuls.enumerated().map { index, matmul in
            guard let preparation = matmul.preparation else { return nil }
            if let known = preparations.firstIndex(where: { $0.preparation == preparation }) { return known }
            preparations.append((preparation, index))
            return preparations.count - 1
        }
        self.matmuls = matmuls
        self.preparations = preparations
        unretainedPreparations = preparations.map { Unmanaged.passUnretained($0.preparation) }
    }
}

/// A place in a pass where the region's threads deal a matmul's output columns out among themselves: site `index`
/// of `ranges`, reset with the matmul's columns in units of ``unit`` among `threads` threads (a region of another
/// count takes the even split).
struct StealSite {
    let ranges: WorkRanges
    let index: Int
    let threads: Int
    /// Columns per unit: the static split's alignment (the packed layouts' sixteen rows).
    static let unit = 16

    /// Units of a matmul of `columns` output columns.
    static func units(_ columns: Int) -> Int { (columns + unit - 1) / unit }
}

/// A pass's steal sites laid out a fixed number to a layer: matmul `slot` of `layer` deals its columns out at site
/// `layer * perLayer + slot` of `ranges`, among `sharing` threads (a workspace made for more threads serves fewer).
struct LayerStealSites {
    let ranges: WorkRanges
    let perLayer: Int
    let sharing: Int

    init(ranges: WorkRanges, perLayer: Int, threads: Int) {
        self.ranges = ranges
        self.perLayer = perLayer
        sharing = min(threads, ranges.threads)
    }

    /// Deals the `columns` output columns of matmul `slot` of `layer` afresh (before any thread of the pass claims).
    func reset(_ layer: Int, _ slot: Int, columns: Int) {
        ranges.reset(site: layer * perLayer + slot, units: StealSite.units(columns), sharing: sharing)
    }

    /// Deals the output columns of each matmul of `layer` afresh, `columns[slot]` for slot 0, 1, ….
    func reset(_ layer: Int, columns: Int...) {
        for (slot, count) in columns.enumerated() { reset(layer, slot, columns: count) }
    }

    /// The site of matmul `slot` of `layer`.
    func site(_ layer: Int, _ slot: Int) -> StealSite {
        StealSite(ranges: ranges, index: layer * perLayer + slot, threads: sharing)
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
/// input once per preparation, run a lane's part of a bound matmul, add
/// a bias to the columns it wrote.
struct PassStages {
    let buffers: StageBuffers
    let failure: PassFailure

    /// Makes a stage's input by `produce` writing this lane's rows into `shared` (a few rows of a shared stage: every
    /// thread makes all of them in a private copy, no barrier), then prepares it once per distinct preparation of
    /// `group`; more rows than a private copy holds end at a barrier.
    func stage(_ lane: PassLane, width: Int, rows: Int, group: StageGroup, into shared: UnsafeMutablePointer<Float>,
               produce: (Range<Int>, UnsafeMutablePointer<Float>) -> Void) -> StageInput {
        let isPrivate = Self.isPrivate(lane, rows: rows)
        let part = isPrivate ? 0..<rows : lane.rows(of: rows)
        let out = isPrivate ? buffers.privateInput(lane.index) : shared
        produce(part, out)
        return prepare(lane, UnsafePointer(out), width: width, part: part, isPrivate: isPrivate, group: group, produced: true)
    }

    /// Prepares `source` once per distinct preparation of `group`; a barrier after shared preparations. Every row
    /// of `source` is already written — or, with `ownShareWritten`, only this lane's rows (`lane.rows(of:
    /// rows)`) are, as a row-split LayerNorm leaves them: then one barrier follows the preparation (before it, for a
    /// private copy) where the writer would otherwise have ended on its own barrier.
    func stage(_ lane: PassLane, width: Int, rows: Int, group: StageGroup, source: UnsafeMutablePointer<Float>,
               ownShareWritten: Bool = false) -> StageInput {
        let isPrivate = Self.isPrivate(lane, rows: rows)
        if isPrivate && ownShareWritten { lane.barrier() }
        let part = isPrivate ? 0..<rows : lane.rows(of: rows)
        return prepare(lane, UnsafePointer(source), width: width, part: part, isPrivate: isPrivate, group: group,
                       produced: ownShareWritten && !isPrivate)
    }

    /// Whether every thread makes a stage of `rows` rows for itself: a few rows of a shared stage (a lane that owns
    /// its rows makes only those, in the shared buffers at their own offsets).
    private static func isPrivate(_ lane: PassLane, rows: Int) -> Bool {
        !lane.ownsRows && rows <= StageBuffers.privateRows
    }

    private func prepare(_ lane: PassLane, _ input: UnsafePointer<Float>, width: Int, part: Range<Int>, isPrivate: Bool,
                         group: StageGroup, produced: Bool) -> StageInput {
        // A lane that owns its rows prepares them in its own slice of the shared areas (from its first row's offset at
        // the widest width): the other lanes may be at a stage of another width meanwhile.
        let firstRow = lane.ownedRows?.lowerBound ?? 0
        let laneBase = firstRow * buffers.sharedRowBytes
        func area(_ kind: Int) -> UnsafeMutableRawPointer {
            isPrivate ? buffers.privatePrepared(lane.index, kind) : buffers.prepared(kind) + laneBase
        }
        let total = (isPrivate ? buffers.privatePreparedBytes : buffers.preparedBytes) - laneBase
        for (kind, unretained) in group.unretainedPreparations.enumerated() where !part.isEmpty {
            let status = unretained._withUnsafeGuaranteedRef { preparation -> Int32 in
                let offset = preparation.byteCount(rows: part.lowerBound - firstRow, columns: width)
                guard offset >= 0 && offset <= total else { return -1 }
                return preparation.prepare(input + part.lowerBound * width, rows: part.count, columns: width,
                                           into: area(kind) + offset, capacity: total - offset)
            }
            if status != 0 { failure.record(group.matmuls[group.preparations[kind].user].failure(status)) }
        }
        var result = StageInput(x: input, prepared: (nil, nil, nil), firstRow: firstRow)
        for (index, slot) in group.slots.enumerated() {
            if let slot { result[index] = UnsafeRawPointer(area(slot)) }
        }
        if !isPrivate && (produced || !group.preparations.isEmpty) { lane.barrier() }
        return result
    }

    /// This lane's weight rows of `matmul` (all of them, or its share); returns the rows (output columns) it wrote.
    @discardableResult
    func matmul(_ lane: PassLane, _ matmul: BoundMatmul, _ input: StageInput, _ slot: Int, rows: Int,
                into y: UnsafeMutablePointer<Float>) -> Range<Int> {
        self.matmul(lane, matmul, input, slot, inputRows: 0..<rows, into: y)
    }

    /// This lane's part of `matmul` for the input rows `inputRows` only (their outputs at their own rows of `y`):
    /// a pass that runs its epilogue on a few rows at a time while the GEMM's outputs are still in cache.
    func matmul(_ lane: PassLane, _ matmul: BoundMatmul, _ input: StageInput, _ slot: Int, inputRows: Range<Int>,
                into y: UnsafeMutablePointer<Float>) -> Range<Int> {
        let range = Self.ownColumns(lane, matmul)
        run(matmul, input, slot, inputRows: inputRows, into: y, columns: range)
        return range
    }

    /// Output columns of `matmul` for `rows` input rows in pieces, each followed by `epilogue` over the columns it
    /// wrote: with a `site`, the pieces this lane claims there (``WorkRanges``, units of ``StealSite/unit``
    /// columns — the faster thread takes over the slower one's last columns); without, its share as one piece.
    func matmul(_ lane: PassLane, _ matmul: BoundMatmul, _ input: StageInput, _ slot: Int, rows: Int,
                into y: UnsafeMutablePointer<Float>, site: StealSite?, epilogue: (Range<Int>) -> Void = { _ in }) {
        forEachPiece(lane, of: matmul, site: site) { columns in
            run(matmul, input, slot, inputRows: 0..<rows, into: y, columns: columns)
            epilogue(columns)
        }
    }

    /// Calls `body` with each piece of `matmul`'s output columns this lane computes (as the matmul above).
    func forEachPiece(_ lane: PassLane, of matmul: BoundMatmul, site: StealSite?, _ body: (Range<Int>) -> Void) {
        guard let site, matmul.splittable, !lane.ownsRows, lane.thread.count == site.threads else {
            let columns = Self.ownColumns(lane, matmul)
            if !columns.isEmpty { body(columns) }
            return
        }
        while let units = site.ranges.claim(site: site.index, thread: lane.index) {
            let columns = min(matmul.rows, units.lowerBound * StealSite.unit)..<min(matmul.rows, units.upperBound * StealSite.unit)
            if !columns.isEmpty { body(columns) }
        }
    }

    /// This lane's share of `matmul`'s output columns (all or none of an unsplittable one's).
    private static func ownColumns(_ lane: PassLane, _ matmul: BoundMatmul) -> Range<Int> {
        matmul.splittable ? lane.columns(of: matmul.rows, alignment: StealSite.unit) : (lane.runsUnsplitWork ? 0..<matmul.rows : 0..<0)
    }

    /// Output `columns` of `matmul` for the input rows `inputRows` (their outputs at their own rows of `y`).
    func run(_ matmul: BoundMatmul, _ input: StageInput, _ slot: Int, inputRows: Range<Int>, into y: UnsafeMutablePointer<Float>,
             columns range: Range<Int>) {
        let first = inputRows.lowerBound
        let prepared = input[slot].map { $0 + (matmul.preparation?.byteCount(rows: first - input.firstRow, columns: matmul.columns) ?? 0) }
        let status = matmul.run(input.x + first * matmul.columns, prepared: prepared, m: inputRows.count,
                                into: y + first * matmul.rows, rows: range)
        if status != 0 { failure.record(matmul.failure(status)) }
    }

    /// x[:, columns] += addend[:, columns] (both row stride `width`) for `rows` rows, with `op` (an `add`): a
    /// residual added over the output columns this thread just computed.
    func addRows(_ op: BoundOp, _ addend: UnsafePointer<Float>, to x: UnsafeMutablePointer<Float>, width: Int, rows: Int, columns: Range<Int>) {
        guard !columns.isEmpty else { return }
        let offset = columns.lowerBound
        check(op.addRows(x + offset, stride: width, addend + offset, stride: width, rows: rows, count: columns.count), op)
    }

    /// x[:, columns] += bias[columns] for `rows` rows (row stride `width`), with `op` (an `add`).
    func addBias(_ op: BoundOp, _ bias: UnsafePointer<Float>, to x: UnsafeMutablePointer<Float>, width: Int, rows: Int, columns: Range<Int>) {
        guard !columns.isEmpty else { return }
        check(op.addRows(x + columns.lowerBound, stride: width, bias + columns.lowerBound, stride: 0, rows: rows, count: columns.count), op)
    }

    /// Records a failure when `status` (of `op`, after its fallback) is not 0.
    @inline(__always)
    func check(_ status: Int32, _ op: BoundOp) {
        if status != 0 { failure.record(.rejected(kernel: op.placement.backend, argument: "\(op.placement.op)", status: "status \(status)")) }
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
    /// The most bytes any of the matmuls' preparations needs for `rows` rows of `width`.
    let preparedBytes: @Sendable (Int, Int) -> Int

    init(_ sources: [WeightMatrix], pool: WorkerPool, bind: (Int, WeightMatrix) throws -> BoundMatmul) throws {
        let order = sources.indices.sorted { sources[$0].byteCount > sources[$1].byteCount }
        let results = ResultSlots<BoundMatmul>(count: sources.count)
        pool.parallelFor(order.count, qos: .current) { part in
            let index = order[part]
            results.set(index, Result { try bind(index, sources[index]) })
        }
        all = try results.values()
        var work: [ComputeUnit: Double] = [:]
        for matmul in all { work[matmul.placement.unit, default: 0] += 2 * Double(matmul.rows) * Double(matmul.columns) }
        route = work.max { $0.value < $1.value }?.key ?? .cpu
        operationsPerToken = work.values.reduce(0, +)
        let preparations = Array(Set(all.compactMap(\.preparation)))
        preparedBytes = { rows, width in preparations.map { $0.byteCount(rows: rows, columns: width) }.max() ?? 0 }
    }

    /// Modelled joules of the matmuls for one row (token) of input, from `context`'s costs.
    func joulesPerToken(_ context: ComputeContext) -> Double {
        all.reduce(0) { total, matmul in
            total + context.cost(OpSupport(.matmul, matmul.placement.type), on: matmul.placement.backend)
                .estimate(work: 2 * Double(matmul.rows) * Double(matmul.columns)).joules
        }
    }
}

/// One result per index, filled from several threads.
final class ResultSlots<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var slots: [Result<Value, Error>?]

    init(count: Int) { slots = Array(repeating: nil, count: count) }

    func set(_ index: Int, _ result: Result<Value, Error>) { lock.withLock { slots[index] = result } }

    /// The values of the slots set with a value, in index order (slots not set, or set with an error, left out).
    var setValues: [Value] { lock.withLock { slots }.compactMap { try? $0?.get() } }

    /// Every value in order, or the first error by index.
    func values() throws -> [Value] { try lock.withLock { slots }.map { try $0!.get() } }
}
