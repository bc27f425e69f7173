import _CEmberKernels
import Testing
@testable import EmberCore
import EmberTestSupport

/// Bad input gets a status from C and a typed error from Swift, never a crash.
@Suite("Quantized kernels refuse bad input")
struct KernelInputTests {
    @Test func rowFunctionsReturnStatuses() {
        var x = [Float](repeating: 1, count: 64)
        var blocks = [UInt8](repeating: 0, count: 200)
        #expect(ek_quantize_row(EK_ISA_SCALAR, EK_FORMAT_Q8_0, &x, &blocks, 33) == EK_ERR_SHAPE)
        #expect(ek_quantize_row(EK_ISA_SCALAR, EK_FORMAT_Q8_0, &x, &blocks, -32) == EK_ERR_SHAPE)
        #expect(ek_quantize_row(EK_ISA_SCALAR, EK_FORMAT_Q8_0, nil, &blocks, 32) == EK_ERR_NULL_POINTER)
        #expect(ek_quantize_row(EK_ISA_SCALAR, ek_format(rawValue: 9), &x, &blocks, 32) == EK_ERR_FORMAT)
        #expect(ek_dequantize_row(EK_ISA_SCALAR, EK_FORMAT_Q4_0, &blocks, nil, 32) == EK_ERR_NULL_POINTER)
        #expect(ek_quantize_row_q8_0_ref(&x, nil, 32) == EK_ERR_NULL_POINTER)
        #if arch(x86_64)
        #expect(ek_quantize_row(EK_ISA_NEON, EK_FORMAT_Q8_0, &x, &blocks, 32) == EK_ERR_ISA_UNSUPPORTED)
        #endif
    }

    @Test func matrixFunctionsReturnStatuses() {
        let blocks = [UInt8](repeating: 0, count: 18 * 4)
        var packed = [UInt8](repeating: 0, count: ek_packed_size(EK_FORMAT_Q4_0, 2, 64))
        #expect(ek_pack_weights(EK_FORMAT_Q4_0, blocks, 2, 63, &packed, packed.count) == EK_ERR_SHAPE)
        #expect(ek_pack_weights(EK_FORMAT_Q4_0, blocks, 2, 64, &packed, 10) == EK_ERR_BUFFER_TOO_SMALL)
        #expect(ek_pack_weights(EK_FORMAT_Q4_0, nil, 2, 64, &packed, packed.count) == EK_ERR_NULL_POINTER)
        #expect(ek_pack_weights(EK_FORMAT_Q4_0, blocks, 2, 64, &packed, packed.count) == EK_OK)
        #expect(ek_packed_size(EK_FORMAT_Q4_0, 2, 31) == 0)
        #expect(ek_packed_size(EK_FORMAT_Q4_0, Int64.max, 1 << 40) == 0, "overflow is refused, not wrapped")

        var act = [ek_block_q8_act](repeating: ek_block_q8_act(), count: 2)
        var x = [Float](repeating: 1, count: 64)
        #expect(ek_quantize_activations(EK_ISA_SCALAR, EK_FORMAT_Q4_0, &x, 1, 64, &act, 10) == EK_ERR_BUFFER_TOO_SMALL)
        #expect(ek_quantize_activations(EK_ISA_SCALAR, EK_FORMAT_Q4_0, &x, 1, 48, &act, 96) == EK_ERR_SHAPE)
        #expect(ek_quantize_activations(EK_ISA_SCALAR, EK_FORMAT_Q4_0, &x, 1, 64, &act, 96) == EK_OK)

        var y = [Float](repeating: 0, count: 2)
        packed.withUnsafeBytes { data in
            var w = ek_packed_matrix(format: EK_FORMAT_Q4_0, n: 2, k: 64, data: data.baseAddress, flags: 0)
            #expect(ek_gemm_packed(EK_ISA_SCALAR, &w, act, 1, &y, 2, 0, 3) == EK_ERR_RANGE)
            #expect(ek_gemm_packed(EK_ISA_SCALAR, &w, act, 1, &y, 2, -1, 1) == EK_ERR_RANGE)
            #expect(ek_gemm_packed(EK_ISA_SCALAR, &w, act, 1, &y, 2, 2, 1) == EK_ERR_RANGE)
            #expect(ek_gemm_packed(EK_ISA_SCALAR, &w, act, 1, &y, 1, 0, 2) == EK_ERR_SHAPE)
            #expect(ek_gemm_packed(EK_ISA_SCALAR, &w, nil, 1, &y, 2, 0, 2) == EK_ERR_NULL_POINTER)
            #expect(ek_gemm_packed(EK_ISA_SCALAR, nil, act, 1, &y, 2, 0, 2) == EK_ERR_NULL_POINTER)
            w.k = 40
            #expect(ek_gemm_packed(EK_ISA_SCALAR, &w, act, 1, &y, 2, 0, 2) == EK_ERR_SHAPE)
            w.k = 64
            w.format = ek_format(rawValue: 7)
            #expect(ek_gemm_packed(EK_ISA_SCALAR, &w, act, 1, &y, 2, 0, 2) == EK_ERR_FORMAT)
        }
        #expect(ek_gemm_ref(EK_FORMAT_Q4_0, blocks, x, &y, 1, 2, 64, 0, 5) == EK_ERR_RANGE)
        #expect(ek_gemm_ref(EK_FORMAT_Q4_0, blocks, x, &y, 1, 2, 65, 0, 2) == EK_ERR_SHAPE)
    }

    @Test func swiftWrappersThrowTypedErrorsNamingTheArgument() throws {
        #expect(throws: KernelError.invalidArgument(argument: "columns", found: "33", expected: "a multiple of 32")) {
            try [UInt8](repeating: 0, count: 34).withUnsafeBytes {
                try QuantizedMatrix(type: .q8_0, rows: 1, columns: 33, blocks: $0)
            }
        }
        #expect(throws: KernelError.self) {
            try [UInt8](repeating: 0, count: 10).withUnsafeBytes {
                try QuantizedMatrix(type: .q8_0, rows: 1, columns: 32, blocks: $0)
            }
        }
        let w = try QuantizedMatrix(quantizing: try Tensor(zeros: [4, 64]), to: .q4_1)
        #expect(throws: TensorError.shapeMismatch(argument: "x", expected: "[M, 64] (K from w)", found: [2, 32])) {
            try matmul(try Tensor(zeros: [2, 32]), w)
        }
        var y = try Tensor(zeros: [2, 5])
        #expect(throws: TensorError.shapeMismatch(argument: "y", expected: "[2, 4]", found: [2, 5])) {
            try matmul(try Tensor(zeros: [2, 64]), w, into: &y)
        }
        #if arch(x86_64)
        #expect(throws: KernelError.self) { try matmul(try Tensor(zeros: [1, 64]), w, isa: .neon) }
        #endif
        #expect(try matmul(try Tensor(zeros: [3, 64]), w).scalars() == [Float](repeating: 0, count: 12))
    }
}
