import _CEmberKernels

/// The copy of a weight matrix a backend makes to multiply it — once, when it binds the weights, and held as long as
/// the weights are: with a precision's requantized weights, what binding a route costs in memory beyond the file
/// (what a scheduler's memory budget counts before it binds one; ``WeightMatrix/heldCopyBytes`` measures what exists).
public enum WeightCopy: Sendable, Equatable {
    /// The weights as they lie (GGUF rows, fp32, fp16 and bf16 widened in registers): nothing converted — read in
    /// place, or, for a model file's mapping or a requantized variant's pages on a system with huge pages, from a copy
    /// of the same bytes on them (``WeightMatrix/streamsCopy``), which ``WeightMatrix/bytesToBind(with:)`` counts.
    case none
    /// The packed blocks of the block kernels (``WeightMatrix/packed()``): sixteen rows side by side.
    case packed
    /// Eight rows side by side, the K-quants' scales decoded (``WeightMatrix/interleaved()``).
    case interleaved
    /// fp32 values, four bytes a weight (``WeightMatrix/fp32()``); nothing for weights stored as fp32.
    case fp32

    /// Bytes of this copy of a `rows` × `columns` matrix of `type` (0 when the type has no such copy).
    public func byteCount(type: TensorType, rows: Int, columns: Int) -> Int {
        switch self {
        case .none: return 0
        case .packed:
            guard let format = type.packedFormat else { return 0 }
            return max(0, Int(ek_packed_size(format, Int64(rows), Int64(columns))))
        case .interleaved:
            guard let format = type.blockFormat, ek_format_interleavable(format) else { return 0 }
            return max(0, Int(ek_interleaved_size(format, Int64(rows), Int64(columns))))
        case .fp32:
            guard type != .f32 else { return 0 }
            let (count, overflow) = rows.multipliedReportingOverflow(by: columns)
            return overflow ? .max / 4 : count * 4
        }
    }
}

/// The copy each tensor type's matmul keeps on the backend the registry places it on for `units`, asked once a type:
/// what a model's prediction of a route's weight copies reads for each of its matrices.
public struct WeightCopyPlacements {
    private let registry: BackendRegistry
    private let units: ComputeUnits
    private var known: [TensorType: WeightCopy] = [:]

    /// The placements of `registry` for `units`.
    public init(registry: BackendRegistry, units: ComputeUnits) {
        self.registry = registry
        self.units = units
    }

    /// The copy a matmul of `type` keeps (``WeightCopy/none`` when no backend runs it).
    public mutating func copy(for type: TensorType) -> WeightCopy {
        if let copy = known[type] { return copy }
        let copy = registry.matmulCopy(type: type, units: units) ?? .none
        known[type] = copy
        return copy
    }
}
