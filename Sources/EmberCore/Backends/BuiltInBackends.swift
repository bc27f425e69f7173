import _CEmberKernels

/// The block-quantized types Ember's kernels multiply (packed, or as GGUF rows).
private let blockTypes: [TensorType] = TensorType.table.filter { $0.blockFormat != nil }
/// The half-precision types the SIMD kernels widen in registers.
private let halfTypes: [TensorType] = [.f16, .bf16]
/// Every type Ember can turn into fp32 (what BLAS and the portable loop run on, converted once).
private let convertibleTypes: [TensorType] = TensorType.table.filter(\.canDequantize)
/// The element-wise and attention ops the CPU backends run, each on its type.
private let vectorOps: [OpSupport] =
    [Op.rmsNorm, .layerNorm, .rope, .softmax, .silu, .gelu, .swiglu, .geglu, .add, .mul].map { OpSupport($0, .f32) }
    + [Op.attentionScores, .attentionValues, .attention, .sequenceAttention].flatMap { op in [TensorType.f32, .f16].map { OpSupport(op, $0) } }
    + convertibleTypes.map { OpSupport(.embedding, $0) }

/// The neural-engine route's backend: Ember's hand-tuned SIMD kernels
/// (`CKernels/x86_*.c`, `arm_neon.c`): Q8_0 (and Q4_0/Q4_1 on AVX-512 and
/// NEON) on weights packed once at load, Q4_0/Q4_1 (AVX2 only)/Q5_0/Q5_1/
/// IQ4_NL/Q4_K/Q5_K/Q6_K/IQ4_XS interleaved eight rows at a time at load where
/// the ISA has those kernels, every other block type on
/// its GGUF rows as they lie (SIMD where the ISA has a row kernel, the
/// scalar reference otherwise — `ember info` says which), F16/BF16 widened
/// in registers. It runs matmul-class ops only;
/// the others fall back to the CPU route.
final class SIMDBackend: Backend, @unchecked Sendable {
    let descriptor: BackendDescriptor
    let opTable = OpTable()
    let isa: KernelISA

    init(isa: KernelISA) {
        self.isa = isa
        descriptor = BackendDescriptor(
            name: "simd-\(isa)", unit: .neuralEngine, score: 100,
            supports: Set(blockTypes.flatMap { [OpSupport(.matmul, $0), OpSupport(.quantizeActivations, $0)] }
                + halfTypes.map { OpSupport(.matmul, $0) }), requiredISA: isa)
    }

    func bindMatmul(_ weights: WeightMatrix, placement: Placement, pool: WorkerPool?) throws -> BoundMatmul {
        // Interleaved first: Q4_0 and Q4_1 have both layouts on AVX2, where the interleaved one streams faster.
        if weights.type.hasInterleavedKernel(isa) { return try .interleaved(weights, isa: isa, placement: placement) }
        if weights.type.packedFormat != nil { return try .packed(weights, isa: isa, placement: placement) }
        if weights.type.blockFormat != nil { return try .rows(weights, isa: isa, placement: placement) }
        return try .half(weights, isa: isa, placement: placement)
    }

    func matmulCopy(for type: TensorType) -> WeightCopy {
        if type.hasInterleavedKernel(isa) { return .interleaved }
        return type.packedFormat != nil ? .packed : .none
    }
}

/// The GPU route's backend: OpenBLAS sgemm/sgemv on fp32 weights (other types
/// converted to fp32 once and cached on the weights), one thread per call,
/// rows split over Ember's workers. Up to ``BoundMatmul/fewRows`` rows of
/// input run `isa`'s fp32 kernel instead, which reads the weights as they lie
/// where sgemm packs them on every call (and streams a single row faster than
/// sgemv) — and every product when OpenBLAS runs narrower kernels than `isa`
/// (its Haswell core on an AVX-512 CPU: ours measured 1.2× faster at MiniLM's
/// 614-row batches), or any number of rows of up to
/// ``BoundMatmul/panelledColumns`` columns when its kernels are as wide as
/// AVX2's (batch-32 MiniLM 7 % faster than OpenBLAS's Haswell core, SmolLM2's
/// 512-token prefill equal or 2–4 % faster). Against OpenBLAS's SkylakeX
/// core the AVX-512 kernel measured 0.78–1.09× at 128 rows (its packed outer
/// products; ~0.8× at 600 rows before them), so that core keeps what is above.
///
/// F16 and BF16 weights stay 16-bit here when `isa` has SIMD fp32 kernels — the
/// fp16 precision of this route, as GPUs on phones run it: `isa`'s half kernels
/// widen them in registers (decode reads half of fp32's bytes; from 40 rows the
/// packed outer products widen each panel once and run at fp32's rate).
final class BLASBackend: Backend, @unchecked Sendable {
    let descriptor: BackendDescriptor
    let opTable = OpTable()
    let fewRows: BoundMatmul.FewRows?

    init(isa: KernelISA, blasLevel: SIMDLevel? = BLASLibrary.current.coreLevel) {
        let halvesKept = ek_gemm_f32_is_simd(isa.cValue)
        descriptor = BackendDescriptor(
            name: "openblas", unit: .gpu, score: 100, supports: Set(convertibleTypes.map { OpSupport(.matmul, $0) }),
            conversion: halvesKept ? "weights dequantized to fp32 once and cached (f16 and bf16 kept, widened in registers)"
                                   : "weights dequantized to fp32 once and cached",
            convertedTypes: Set(convertibleTypes.filter { $0 != .f32 && !(halvesKept && halfTypes.contains($0)) }))
        guard halvesKept else {
            fewRows = nil
            return
        }
        let width: SIMDLevel = isa.isAVX512 ? .avx512 : .avx2
        if let blasLevel, blasLevel < width {
            fewRows = .init(isa: isa, limit: .max, anyRowsUpToColumns: .max)
        } else {
            let shortRows = width == .avx2 && blasLevel == .avx2 ? BoundMatmul.panelledColumns : 0
            fewRows = .init(isa: isa, limit: BoundMatmul.fewRows, anyRowsUpToColumns: shortRows)
        }
    }

    func bindMatmul(_ weights: WeightMatrix, placement: Placement, pool: WorkerPool?) throws -> BoundMatmul {
        if let fewRows, halfTypes.contains(weights.type) { return try .half(weights, isa: fewRows.isa, placement: placement) }
        return try .blas(weights, fewRows: fewRows, placement: placement, pool: pool)
    }

    func matmulCopy(for type: TensorType) -> WeightCopy {
        fewRows != nil && halfTypes.contains(type) ? .none : .fp32
    }
}

/// The CPU route's fast backend: the element-wise and attention ops with
/// their AVX2 + FMA + F16C code (`CKernels/ops.c`). Registered where the CPU
/// has it and the kernel ISA chosen is not the scalar one.
final class CPUSIMDBackend: Backend, @unchecked Sendable {
    let descriptor: BackendDescriptor
    let opTable: OpTable
    private let context = BuiltInOpContext(isa: .scalar)

    init(isa: KernelISA) {
        descriptor = BackendDescriptor(name: "cpu-\(isa)", unit: .cpu, score: 50, supports: Set(vectorOps), requiredISA: isa)
        context.pointer.pointee.isa = isa.cValue
        opTable = .builtIn(context: context.pointer)
    }

    func bindMatmul(_ weights: WeightMatrix, placement: Placement, pool: WorkerPool?) throws -> BoundMatmul {
        throw KernelError.invalidArgument(argument: "backend", found: descriptor.name, expected: "a backend that runs matmul")
    }
}

/// The scalar reference: portable C for every op Ember knows, on the CPU
/// route — the oracle every other backend's kernels are tested against, and
/// the last resort that makes any model complete. Block formats run the
/// scalar packed kernels, the other block formats the scalar row oracle on
/// their GGUF rows; the float types run the portable fp32 loop.
final class ScalarReferenceBackend: Backend, @unchecked Sendable {
    let descriptor = BackendDescriptor(
        name: "scalar-reference", unit: .cpu, score: 10,
        supports: Set(vectorOps + convertibleTypes.map { OpSupport(.matmul, $0) } + blockTypes.map { OpSupport(.quantizeActivations, $0) }),
        conversion: "weights converted to fp32 once and cached",
        convertedTypes: Set(convertibleTypes.filter { $0 != .f32 && $0.blockFormat == nil }))
    private let context = BuiltInOpContext(isa: .scalar)
    var opTable: OpTable { .builtIn(context: context.pointer) }

    func bindMatmul(_ weights: WeightMatrix, placement: Placement, pool: WorkerPool?) throws -> BoundMatmul {
        if weights.type.packedFormat != nil { return try .packed(weights, isa: .scalar, placement: placement) }
        if weights.type.blockFormat != nil { return try .rows(weights, isa: .scalar, placement: placement) }
        return try .portable(weights, placement: placement, pool: pool)
    }

    func matmulCopy(for type: TensorType) -> WeightCopy {
        if type.packedFormat != nil { return .packed }
        return type.blockFormat != nil ? .none : .fp32
    }
}

/// The context a built-in backend's C ops take (which ISA they run), owned by the backend.
final class BuiltInOpContext: @unchecked Sendable {
    let pointer = UnsafeMutablePointer<ek_backend_context>.allocate(capacity: 1)

    init(isa: KernelISA) { pointer.initialize(to: ek_backend_context(isa: isa.cValue)) }

    deinit { pointer.deallocate() }
}

extension BackendRegistry {
    /// A registry with Ember's own backends for kernel family `isa`: the SIMD block kernels (neural-engine route)
    /// unless `isa` is the scalar one, OpenBLAS (GPU route), the CPU SIMD ops where the CPU has them, and the
    /// scalar reference (CPU route, every op).
    public static func builtIn(isa: KernelISA) -> BackendRegistry {
        let registry = BackendRegistry(reference: ScalarReferenceBackend())
        if isa != .scalar { try? registry.register(SIMDBackend(isa: isa)) }
        try? registry.register(BLASBackend(isa: isa))
        if isa != .scalar, ek_ops_simd_available() { try? registry.register(CPUSIMDBackend(isa: isa)) }
        return registry
    }
}
