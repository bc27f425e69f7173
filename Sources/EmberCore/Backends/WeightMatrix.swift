import _CEmberKernels
import Foundation

/// A weight matrix W[rows × columns] as a model file holds it (GGUF blocks,
/// fp32, fp16 or bf16 rows), with the variants the backends need built on
/// first use and cached: the packed copy the SIMD kernels read, an fp32 copy
/// for BLAS and the portable loop (converted once), and the matrix at another
/// precision (requantized once).
public final class WeightMatrix: @unchecked Sendable {
    /// How the weights are stored (a row of ``TensorType/table``).
    public let type: TensorType
    /// N: output features, one per row.
    public let rows: Int
    /// K: input features per row; a whole number of the type's blocks.
    public let columns: Int
    /// The file's bytes, owned or borrowed from `owner` (e.g. a memory-mapped file). For a requantized variant whose
    /// blocks were given back once its layout copy was made, they are written again first, and kept from then on:
    /// whoever asks for them may read them in place.
    public var bytes: UnsafeRawBufferPointer {
        blocksLock.withLock {
            blocksPinned = true
            do { try restoreBlocksLocked() } catch { fatalError("cannot write again the blocks of a \(type) variant: \(error)") }
        }
        return blocks
    }
    /// Bytes of the blocks (``bytes``'s count, without making them resident).
    public var byteCount: Int { blocks.count }
    /// Whether the blocks are in memory now: false for a requantized variant that gave them back.
    public var holdsBlocks: Bool { blocksLock.withLock { !blocksGivenBack } }
    private let blocks: UnsafeRawBufferPointer
    private let owner: AnyObject?
    /// Where the copies made from these weights (packed, interleaved, fp32, and those of the variants at other
    /// precisions) come from: a model's arena of huge pages, shared by its matrices; nil: each its own allocation.
    public let copyArena: HugePageArena?
    /// A requantized variant's mapping and how to write its blocks again from the weights it was made from: the
    /// blocks only feed a layout copy (packed, interleaved, fp32), so they go back to the system once it is made
    /// unless someone reads them in place (``bytes``). Nil for weights that keep their blocks.
    private let blockPages: PageMemory?
    private let remakeBlocks: ((UnsafeMutableRawPointer) throws -> Void)?
    private var blocksGivenBack = false
    private var blocksPinned = false
    /// Whether the blocks lie in a model file's mapping (`borrowing:…mapped: true`).
    private let mapped: Bool
    /// The copy of the blocks on huge pages the in-place kernels stream when ``streamsCopy`` (made on first use).
    private var streamedCopy: TensorStorage?
    /// Guards the blocks' state; taken alone, or inside ``lock`` (never the other way round): a backend binding under
    /// ``lock`` (``binding(_:make:)``) may read ``bytes``.
    private let blocksLock = NSLock()
    private let lock = NSLock()
    private var packedVariant: QuantizedMatrix?
    private var interleavedVariant: TensorStorage?
    private var fp32Variant: Tensor?
    private var precisionVariants: [Precision: WeightMatrix] = [:]
    private var bindings: [String: AnyObject] = [:]
    /// Q8_0 made with one scale per row (per-channel int8, `init(_:as:…scalePerRow:)`): its products quantize each
    /// activation row at one scale too, so the kernels sum over all of K in integers and scale once per output.
    public private(set) var scalePerRow = false
    /// With ``scalePerRow``: what each activation column is multiplied by before it is quantized ([columns] fp32),
    /// for weights whose columns were divided by the same (smoothing); nil: nothing.
    public private(set) var activationColumnScales: Tensor?

    /// Copies `blocks` (rows × columns of `type`); with `copyArena`, into it (as the copies made from them).
    public convenience init(type: TensorType, rows: Int, columns: Int, copying blocks: UnsafeRawBufferPointer,
                            copyArena: HugePageArena? = nil) throws {
        let storage = try TensorStorage.forWeights(copying: blocks, arena: copyArena)
        try self.init(type: type, rows: rows, columns: columns,
                      borrowing: UnsafeRawBufferPointer(start: storage.baseAddress, count: blocks.count), owner: storage,
                      copyArena: copyArena)
    }

    /// Uses `blocks` in place; `owner` keeps them alive. The copies made from them come from `copyArena` when given.
    /// `mapped`: the blocks lie in a model file's mapping, whose 4 KB pages the kernels that read weights as they lie
    /// would cross every 4 KB — they stream a copy on huge pages instead where `copyArena` has them (``streamsCopy``).
    public init(type: TensorType, rows: Int, columns: Int, borrowing blocks: UnsafeRawBufferPointer, owner: AnyObject?,
                copyArena: HugePageArena? = nil, mapped: Bool = false) throws {
        guard let expected = type.byteCount(rows: rows, columns: columns) else {
            throw KernelError.invalidArgument(argument: "columns", found: "\(rows)×\(columns) of \(type)",
                                              expected: "non-negative dimensions, columns a multiple of \(type.blockSize)")
        }
        guard blocks.count == expected else {
            throw KernelError.invalidArgument(argument: "blocks", found: "\(blocks.count) bytes", expected: "\(expected) bytes")
        }
        self.type = type
        self.rows = rows
        self.columns = columns
        self.blocks = blocks
        self.owner = owner
        self.copyArena = copyArena
        self.mapped = mapped
        blockPages = nil
        remakeBlocks = nil
    }

    /// A requantized variant in `pages`, whose blocks `remake` writes again (nil: they are kept).
    private init(type: TensorType, rows: Int, columns: Int, byteCount: Int, pages: PageMemory,
                 remake: ((UnsafeMutableRawPointer) throws -> Void)?, copyArena: HugePageArena?) {
        self.copyArena = copyArena
        self.type = type
        self.rows = rows
        self.columns = columns
        blocks = UnsafeRawBufferPointer(start: pages.baseAddress, count: byteCount)
        owner = pages
        blockPages = pages
        remakeBlocks = remake
        mapped = false
    }

    /// Writes a variant's given-back blocks again (``blocksLock`` held).
    private func restoreBlocksLocked() throws {
        guard blocksGivenBack, let blockPages, let remakeBlocks else { return }
        try remakeBlocks(blockPages.baseAddress)
        blocksGivenBack = false
    }

    /// `body` making a copy from the blocks (written again first if they were given back), which go back after it
    /// unless something reads them in place.
    private func copyingBlocks<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) throws -> Result {
        try blocksLock.withLock {
            try restoreBlocksLocked()
            defer { giveBackBlocksLocked() }
            return try body(blocks)
        }
    }

    /// Gives a variant's blocks back once a copy has been made from them, unless they are read in place
    /// (``blocksLock`` held).
    private func giveBackBlocksLocked() {
        guard let blockPages, remakeBlocks != nil, !blocksPinned, !blocksGivenBack else { return }
        blockPages.discard()
        blocksGivenBack = true
    }

    /// fp32 weights [rows, columns] as a matrix of `type` (quantized here when not f32).
    ///
    /// With `refinedScales`, 4-bit blocks get least-squares scales (lower
    /// error than min/max; see `ScaleRefinement`). With `q8ValueLimit` (Q8_0
    /// only, 1…127), the values span [−limit, limit] instead of [−127, 127]:
    /// 63 makes weights that AVX2 without VNNI multiplies faster. With
    /// `scalePerRow` (Q8_0 only) every block of a row gets the row's scale
    /// (``scalePerRow``), and `activationColumnScales` ([columns]) what the
    /// activations are multiplied by (weights given with their columns
    /// divided by the same).
    public convenience init(_ weights: Tensor, as type: TensorType, refinedScales: Bool = false, q8ValueLimit: Int? = nil,
                            scalePerRow: Bool = false, activationColumnScales: Tensor? = nil, copyArena: HugePageArena? = nil) throws {
        if let scales = activationColumnScales {
            guard scalePerRow, type == .q8_0, scales.dtype == .float32, scales.shape == [weights.shape.last ?? -1] else {
                throw TensorError.shapeMismatch(argument: "activationColumnScales", expected: "fp32 [\(weights.shape.last ?? 0)] with q8_0 scalePerRow",
                                                found: scales.shape)
            }
        }
        guard weights.rank == 2, weights.dtype == .float32 else {
            throw TensorError.shapeMismatch(argument: "weights", expected: "fp32 [N, K]", found: weights.shape)
        }
        guard type.canQuantize else {
            throw KernelError.invalidArgument(argument: "type", found: "\(type)", expected: "\(TensorType.quantizable) to quantize into")
        }
        let (rows, columns) = (weights.shape[0], weights.shape[1])
        guard let byteCount = type.byteCount(rows: rows, columns: columns) else {
            throw KernelError.invalidArgument(argument: "columns", found: "\(columns)", expected: "a multiple of \(type.blockSize)")
        }
        var data = [UInt8](repeating: 0, count: byteCount)
        try weights.withUnsafeBufferPointer { values in
            try data.withUnsafeMutableBytes { out in
                let rowBytes = byteCount / max(rows, 1)
                for row in 0..<rows {
                    if scalePerRow, type == .q8_0 {
                        try KernelError.check(
                            ek_quantize_row_q8_0_row_scaled(values.baseAddress! + row * columns,
                                                            (out.baseAddress! + row * rowBytes).assumingMemoryBound(to: ek_block_q8_0.self),
                                                            Int64(columns), Int32(q8ValueLimit ?? 127)),
                            kernel: "ek_quantize_row_q8_0_row_scaled", argument: { _ in "q8ValueLimit" })
                        continue
                    }
                    if let limit = q8ValueLimit, type == .q8_0 {
                        try KernelError.check(
                            ek_quantize_row_q8_0_limited(values.baseAddress! + row * columns,
                                                         (out.baseAddress! + row * rowBytes).assumingMemoryBound(to: ek_block_q8_0.self),
                                                         Int64(columns), Int32(limit)),
                            kernel: "ek_quantize_row_q8_0_limited", argument: { _ in "q8ValueLimit" })
                        continue
                    }
                    try type.quantizeRow(values.baseAddress! + row * columns, columns: columns, into: out.baseAddress! + row * rowBytes)
                }
                if refinedScales, let format = type.packedFormat {
                    ScaleRefinement.refine(format, values: values.baseAddress!, count: rows * columns, blocks: out.baseAddress!)
                }
            }
        }
        let storage = try data.withUnsafeBytes { try TensorStorage.forWeights(copying: $0, arena: nil) }
        try self.init(type: type, rows: rows, columns: columns,
                      borrowing: UnsafeRawBufferPointer(start: storage.baseAddress, count: data.count), owner: storage,
                      copyArena: copyArena)
        self.scalePerRow = scalePerRow && type == .q8_0
        self.activationColumnScales = activationColumnScales
    }

    /// Bytes of one row.
    public var rowBytes: Int { type.byteCount(rows: 1, columns: columns) ?? 0 }

    /// The packed copy for the SIMD and scalar block kernels (built once).
    public func packed() throws -> QuantizedMatrix {
        try lock.withLock {
            if let packedVariant { return packedVariant }
            guard type.packedFormat != nil else {
                throw KernelError.invalidArgument(argument: "type", found: "\(type)", expected: "a block format the packed kernels take (q8_0, q4_0, q4_1)")
            }
            let made = try copyingBlocks { try QuantizedMatrix(type: type, rows: rows, columns: columns, blocks: $0, arena: copyArena) }
            packedVariant = made
            return made
        }
    }

    /// The interleaved copy of a row-format matrix (`ek_interleaved.h`: eight rows side by side, the K-quants'
    /// scales pre-decoded), built once; the SIMD kernels of the types that have one read it instead of the rows.
    public func interleaved() throws -> TensorStorage {
        try lock.withLock {
            if let interleavedVariant { return interleavedVariant }
            guard let format = type.blockFormat, ek_format_interleavable(format) else {
                throw KernelError.invalidArgument(argument: "type", found: "\(type)",
                                                  expected: "a type with an interleaved layout (q4_0, q4_1, q5_0, q5_1, iq4_nl, q4_k, q5_k, q6_k, iq4_xs)")
            }
            let size = ek_interleaved_size(format, Int64(rows), Int64(columns))
            guard size > 0 || rows == 0 || columns == 0 else {
                throw KernelError.invalidArgument(argument: "rows", found: "\(rows)×\(columns)", expected: "a matrix whose interleaved copy fits in memory")
            }
            let storage = try TensorStorage.forWeights(byteCount: size, arena: copyArena) // the interleaving writes every byte
            try copyingBlocks { blocks in
                if size > 0, let base = blocks.baseAddress {
                    try KernelError.check(ek_interleave_weights(format, base, Int64(rows), Int64(columns), storage.baseAddress, size),
                                          kernel: "ek_interleave_weights", argument: { _ in "weights" })
                }
            }
            interleavedVariant = storage
            return storage
        }
    }

    /// Whether the kernels that read these weights as they lie (fp32 rows, fp16 and bf16 widened in registers, GGUF
    /// rows) stream a copy of them on huge pages (``streamedBlocks()``) instead: blocks in a model file's mapping or
    /// in a requantized variant's own pages sit on pages of 4 KB, and a decode step, which streams every weight once,
    /// crossed one every 4 KB. Only where ``copyArena`` has huge pages (``HugePageArena/hasHugePages``); elsewhere a
    /// mapping's clean pages cost less than a copy. SmolLM2's F32 file, fp32 decode on a 2-core Zen 4, alternating
    /// rounds of 5 runs: medians 42.0 → 47.0 tok/s, ahead in 5 of 6.
    public var streamsCopy: Bool { (mapped || blockPages != nil) && copyArena?.hasHugePages == true }

    /// The blocks the kernels that read weights as they lie stream, and what keeps them alive: when ``streamsCopy``,
    /// the copy on huge pages (made once; a requantized variant's own pages go back once it is made, and a file's
    /// mapping drops the pages it copied from this process — the file's stay in the page cache), else ``bytes``.
    public func streamedBlocks() throws -> (bytes: UnsafeRawBufferPointer, owner: AnyObject) {
        guard streamsCopy else { return (bytes, self) }
        let copy = try lock.withLock { try streamedCopyLocked() }
        return (UnsafeRawBufferPointer(start: copy.baseAddress, count: byteCount), copy)
    }

    /// ``streamedBlocks()``'s copy, made the first time (``lock`` held).
    private func streamedCopyLocked() throws -> TensorStorage {
        if let streamedCopy { return streamedCopy }
        let copy = try copyingBlocks { try TensorStorage.forWeights(copying: $0, arena: copyArena) }
        if mapped { Self.dropPages(of: blocks) }
        streamedCopy = copy
        return copy
    }

    /// Drops the whole pages of a file's mapping within `blocks` from this process (`MADV_DONTNEED`): they stay in
    /// the page cache, and a read (a token's embedding row) maps them again.
    private static func dropPages(of blocks: UnsafeRawBufferPointer) {
        #if os(Linux)
        guard let base = blocks.baseAddress else { return }
        let page = PageMemory.pageSize
        let start = (Int(bitPattern: base) + page - 1) / page * page
        let end = (Int(bitPattern: base) + blocks.count) / page * page
        if end > start, let address = UnsafeMutableRawPointer(bitPattern: start) { _ = madvise(address, end - start, MADV_DONTNEED) }
        #endif
    }

    /// The weights as fp32 [rows, columns] (converted once, then cached; f32 weights are borrowed, or their
    /// ``streamedBlocks()`` copy when ``streamsCopy``): the linear map itself, so smoothed weights
    /// (``activationColumnScales``) come back with their columns multiplied by the scales.
    public func fp32() throws -> Tensor {
        try lock.withLock {
            if let fp32Variant { return fp32Variant }
            if type == .f32, streamsCopy {
                let copy = try streamedCopyLocked()
                let made = try Tensor(borrowing: copy.baseAddress, shape: [rows, columns], owner: copy)
                fp32Variant = made
                return made
            }
            let made: Tensor = try copyingBlocks { blocks in
                if type == .f32 {
                    blocksPinned = true // borrowed in place
                    return try Tensor(borrowing: blocks.baseAddress!, shape: [rows, columns], owner: owner)
                }
                var values = Tensor(shape: [rows, columns], dtype: .float32, // every row is written below
                                    storage: try TensorStorage.forWeights(byteCount: rows * columns * 4, arena: copyArena),
                                    byteOffset: 0)
                let rowBytes = rowBytes
                let columnScales = try activationColumnScales?.scalars()
                try values.withUnsafeMutableBufferPointer { out in
                    for row in 0..<rows {
                        let rowValues = out.baseAddress! + row * columns
                        try type.dequantizeRow(blocks.baseAddress! + row * rowBytes, columns: columns, into: rowValues)
                        // Smoothed weights: their columns were divided by what the activations are multiplied by; fp32
                        // products take the activations as they are, so the columns are multiplied back here.
                        if let columnScales { for column in 0..<columns { rowValues[column] *= columnScales[column] } }
                    }
                }
                return values
            }
            fp32Variant = made
            return made
        }
    }

    /// The same weights at `precision`, derived on first use and cached: itself
    /// when already there (F16 and BF16 are both fp16); fp32 by converting;
    /// fp16 as F16, int8 as Q8_0 and int4 as Q4_1, requantized from the fp32
    /// values. One model file thus serves every precision the policy picks.
    /// A matrix holding a weight beyond F16's ±65504 becomes BF16 at fp16 —
    /// fp32's range in the same two bytes, with 8 bits of mantissa instead of 11
    /// — so that a model the policy runs at fp16 is not refused for one outlier.
    public func variant(for precision: Precision) throws -> WeightMatrix {
        if type.precision == precision { return self }
        if let cached = lock.withLock({ precisionVariants[precision] }) { return cached }
        let target = TensorType.derived(for: precision)
        let made: WeightMatrix
        if target == .f32 { // share the cached fp32 copy rather than copy it again
            let values = try fp32()
            made = try WeightMatrix(type: .f32, rows: rows, columns: columns,
                                    borrowing: UnsafeRawBufferPointer(start: values.baseAddress, count: values.byteCount),
                                    owner: values.storage, copyArena: copyArena)
        } else {
            do {
                made = try requantized(to: target)
            } catch is TensorType.BeyondHalfRange where target == .f16 {
                made = try requantized(to: .bf16)
            }
        }
        return lock.withLock {
            if let raced = precisionVariants[precision] { return raced }
            precisionVariants[precision] = made
            return made
        }
    }

    /// The weights as `target`, converted a row at a time through one fp32 row: no fp32 copy of the whole matrix is
    /// made or kept (for SmolLM2 that copy is 540 MB, four times the int8 weights). Made in pages of their own that
    /// go back to the system once a layout copy has been made from them (the int8 route of SmolLM2: 143 MB instead
    /// of 256), written again the same way when read in place — unless these weights are smoothed, whose fp32 copy
    /// has its columns scaled and would not write the same blocks.
    private func requantized(to target: TensorType) throws -> WeightMatrix {
        guard let byteCount = target.byteCount(rows: rows, columns: columns) else {
            throw KernelError.invalidArgument(argument: "columns", found: "\(columns)", expected: "a multiple of \(target.blockSize)")
        }
        let pages = try PageMemory(weightsByteCount: byteCount) // every row is written below
        let source = bytes // read in place from now on (a no-op for a model file's weights)
        let (sourceType, sourceRowBytes, sourceOwner, rows, columns) = (type, rowBytes, owner, rows, columns)
        let targetRowBytes = target.byteCount(rows: 1, columns: columns) ?? 0
        // Row by row from the stored blocks: what the fp32 copy holds too, when there is one and no smoothing.
        let write = { (out: UnsafeMutableRawPointer, cached: Tensor?) throws in
            _ = sourceOwner // keeps the source's blocks mapped as long as this variant can write its own again
            var row = [Float](repeating: 0, count: columns)
            try row.withUnsafeMutableBufferPointer { scratch in
                for index in 0..<rows {
                    let values: UnsafePointer<Float>
                    if let cached {
                        values = UnsafePointer(cached.baseAddress.assumingMemoryBound(to: Float.self)) + index * columns
                    } else {
                        try sourceType.dequantizeRow(source.baseAddress! + index * sourceRowBytes, columns: columns, into: scratch.baseAddress!)
                        values = UnsafePointer(scratch.baseAddress!)
                    }
                    try target.quantizeRow(values, columns: columns, into: out + index * targetRowBytes)
                }
            }
        }
        try write(pages.baseAddress, lock.withLock { fp32Variant })
        return WeightMatrix(type: target, rows: rows, columns: columns, byteCount: byteCount, pages: pages,
                            remake: activationColumnScales == nil ? { try write($0, nil) } : nil, copyArena: copyArena)
    }

    /// A backend's binding of these weights, made by `make` the first time `key` is asked for and kept as long as the
    /// weights (a plugin's `bind_weights` result, say).
    public func binding<Binding: AnyObject>(_ key: String, make: () throws -> Binding) rethrows -> Binding {
        try lock.withLock {
            if let existing = bindings[key] as? Binding { return existing }
            let made = try make()
            bindings[key] = made
            return made
        }
    }

    /// Drops every copy made from these weights (packed, interleaved, fp32, other precisions, backends' bindings);
    /// the next use makes again what it needs. For a model whose precisions were all bound once (a quality
    /// measurement) and will run at one.
    public func releaseDerivedCopies() {
        let variants = lock.withLock { () -> [WeightMatrix] in
            defer {
                packedVariant = nil
                interleavedVariant = nil
                fp32Variant = nil
                streamedCopy = nil
                precisionVariants = [:]
                bindings = [:]
            }
            return Array(precisionVariants.values)
        }
        variants.forEach { $0.releaseDerivedCopies() }
    }

    /// Whether the fp32 copy exists yet (for tests of the caching).
    public var hasFP32Copy: Bool { lock.withLock { fp32Variant != nil } }

    /// Whether `copy` of these weights has been made (``WeightCopy/none`` has unless the blocks are streamed from a copy
    /// not made yet: ``streamsCopy``).
    public func holds(_ copy: WeightCopy) -> Bool {
        lock.withLock {
            switch copy {
            case .none: !streamsCopy || streamedCopy != nil
            case .packed: packedVariant != nil
            case .interleaved: interleavedVariant != nil
            case .fp32: fp32Variant != nil || (type == .f32 && (!streamsCopy || streamedCopy != nil))
            }
        }
    }

    /// Bytes binding these weights with `copy` adds: the copy unless made, or blocks read in place that were given
    /// back (a requantized variant's), which are written again.
    public func bytesToBind(with copy: WeightCopy) -> Int {
        if holds(copy) { return copy == .none && !streamsCopy && !holdsBlocks ? byteCount : 0 }
        // The copy on huge pages the in-place kernels stream: beside a file's mapping, or instead of a variant's own
        // blocks (which go back once it is made, and are written again for it first if they went back already).
        if streamsCopy, copy == .none || (copy == .fp32 && type == .f32) { return mapped || !holdsBlocks ? byteCount : 0 }
        return copy.byteCount(type: type, rows: rows, columns: columns)
    }

    /// Bytes binding these weights at `precision` (nil: as stored) adds to ``heldCopyBytes``: the variant for it when
    /// it is not made yet, and the copy `placements` says the backend keeps (0 once bound). A requantized variant's
    /// blocks count only where nothing else is copied from them (else they go back once the copy is made); an fp32
    /// variant is the fp32 copy.
    public func bytesToBind(at precision: Precision?, placements: inout WeightCopyPlacements) -> Int {
        let made: WeightMatrix? = if let precision { madeVariant(for: precision) } else { self }
        if let made { return made.bytesToBind(with: placements.copy(for: made.type)) }
        let type = TensorType.derived(for: precision!)
        if type == .f32 { return bytesToBind(with: .fp32) + placements.copy(for: .f32).byteCount(type: .f32, rows: rows, columns: columns) }
        return Self.bytesToMake(type, rows: rows, columns: columns, placements: &placements)
    }

    /// Bytes a `rows` × `columns` matrix of `type` made now and bound adds: the copy its backend keeps, and its blocks
    /// only where the kernel reads them in place (else they go back once the copy is made, or go with the matrix).
    public static func bytesToMake(_ type: TensorType, rows: Int, columns: Int, placements: inout WeightCopyPlacements) -> Int {
        let layout = placements.copy(for: type)
        return (layout == .none ? type.byteCount(rows: rows, columns: columns) ?? 0 : 0)
            + layout.byteCount(type: type, rows: rows, columns: columns)
    }

    /// The weights at `precision` if that variant has been made (itself when they are stored at it).
    public func madeVariant(for precision: Precision) -> WeightMatrix? {
        if type.precision == precision { return self }
        return lock.withLock { precisionVariants[precision] }
    }

    /// Bytes of every copy made from these weights and held now: packed, interleaved, fp32 and streamed copies, and the
    /// variants at other precisions with their own copies (a backend's binding of its own is not counted). What the
    /// weights cost beyond the file; ``releaseDerivedCopies()`` brings it to 0.
    public var heldCopyBytes: Int {
        let (held, variants) = lock.withLock { () -> (Int, [WeightMatrix]) in
            var bytes = (packedVariant?.packed.byteCount ?? 0) + (interleavedVariant?.byteCount ?? 0) + (streamedCopy?.byteCount ?? 0)
            if type != .f32 { bytes += fp32Variant?.byteCount ?? 0 } // f32's is borrowed, or the streamed copy
            return (bytes, Array(precisionVariants.values))
        }
        // An fp32 variant borrows the fp32 copy counted above.
        return variants.reduce(held) { $0 + ($1.type == .f32 || !$1.holdsBlocks ? 0 : $1.byteCount) + $1.heldCopyBytes }
    }
}
