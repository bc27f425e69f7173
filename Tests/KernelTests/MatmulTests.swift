import Testing
@testable import EmberCore
import Ember
import EmberTestSupport

/// fp32 matmul through BLAS, checked against a naive triple loop in Double.
@Suite("fp32 matmul")
struct MatmulTests {
    static func randomTensor(_ shape: [Int], _ generator: inout SplitMix64) throws -> Tensor {
        try Tensor(shape: shape, values: (0..<shape.reduce(1, *)).map { _ in generator.nextUnitFloat() * 2 - 1 })
    }

    /// C = A·B (or A·Bᵀ) by the definition, in Double, with the per-element
    /// error bound fp32 accumulation can reach (a wrong index or transpose
    /// errs by about Σ|a·b| itself, thousands of times the bound).
    static func naive(_ a: [Float], _ b: [Float], m: Int, n: Int, k: Int, transposeB: Bool) -> (value: [Double], bound: [Double]) {
        var value = [Double](repeating: 0, count: m * n), bound = value
        for i in 0..<m {
            for j in 0..<n {
                var sum = 0.0, magnitude = 0.0
                for p in 0..<k {
                    let product = Double(a[i * k + p]) * Double(transposeB ? b[j * k + p] : b[p * n + j])
                    sum += product
                    magnitude += abs(product)
                }
                value[i * n + j] = sum
                // The classic bound for a k-term fp32 sum: (k + 2)·u·Σ|a·b|, u = 2⁻²⁴.
                bound[i * n + j] = Double(k + 2) * Double(Float.ulpOfOne) / 2 * magnitude + 1e-30
            }
        }
        return (value, bound)
    }

    static let shapes: [(m: Int, n: Int, k: Int)] = [
        (1, 1, 1), (1, 17, 33), (1, 576, 1536), (17, 1, 33), (64, 1, 5), (3, 5, 7), (5, 3, 7),
        (31, 29, 37), (64, 64, 64), (128, 96, 200), (2, 300, 9), (300, 2, 9), (33, 65, 1),
    ]

    @Test(arguments: shapes, [false, true])
    func matchesNaiveTripleLoop(shape: (m: Int, n: Int, k: Int), transposeB: Bool) throws {
        var generator = SplitMix64(seed: UInt64(shape.m * 1_000_003 + shape.n * 1_009 + shape.k))
        let a = try Self.randomTensor([shape.m, shape.k], &generator)
        let b = try Self.randomTensor(transposeB ? [shape.n, shape.k] : [shape.k, shape.n], &generator)
        let c = try matmul(a, b, transposeB: transposeB)
        #expect(c.shape == [shape.m, shape.n])
        let (expected, bound) = Self.naive(try a.scalars(), try b.scalars(), m: shape.m, n: shape.n, k: shape.k, transposeB: transposeB)
        let got = try c.scalars()
        var worst = 0.0
        for index in got.indices {
            worst = max(worst, abs(Double(got[index]) - expected[index]) / bound[index])
        }
        #expect(worst <= 1, "worst error is \(worst)× the fp32 accumulation bound")
    }

    @Test func accumulateAddsToTheOutput() throws {
        var generator = SplitMix64(seed: 7)
        let a = try Self.randomTensor([4, 6], &generator)
        let b = try Self.randomTensor([6, 5], &generator)
        let product = try matmul(a, b)
        var c = try Tensor(shape: [4, 5], values: [Float](repeating: 1, count: 20))
        try matmul(a, b, into: &c, accumulate: true)
        for (sum, p) in zip(try c.scalars(), try product.scalars()) {
            #expect(abs(sum - (p + 1)) <= 1e-5)
        }
    }

    @Test func emptyInnerDimensionGivesZeros() throws {
        let a = try Tensor(zeros: [3, 0]), b = try Tensor(zeros: [0, 4])
        var c = try Tensor(shape: [3, 4], values: [Float](repeating: 5, count: 12))
        try matmul(a, b, into: &c)
        #expect(try c.scalars() == [Float](repeating: 0, count: 12))
        #expect(try matmul(try Tensor(zeros: [0, 3]), try Tensor(zeros: [3, 2])).shape == [0, 2])
    }

    @Test func innerDimensionMismatchNamesB() throws {
        let a = try Tensor(zeros: [2, 3]), b = try Tensor(zeros: [4, 5])
        #expect(throws: TensorError.shapeMismatch(argument: "b", expected: "[3, N] (K from a)", found: [4, 5])) {
            try matmul(a, b)
        }
        #expect(throws: TensorError.shapeMismatch(argument: "b", expected: "[N, 3] (K from a)", found: [4, 5])) {
            try matmul(a, b, transposeB: true)
        }
    }

    @Test func rankAndTypeErrorsNameTheArgument() throws {
        #expect(throws: TensorError.shapeMismatch(argument: "a", expected: "[M, K]", found: [6])) {
            try matmul(try Tensor(zeros: [6]), try Tensor(zeros: [6, 1]))
        }
        #expect(throws: TensorError.dtypeMismatch(argument: "b", expected: .float32, found: .int8)) {
            try matmul(try Tensor(zeros: [2, 2]), try Tensor(zeros: [2, 2], dtype: .int8))
        }
        var wrong = try Tensor(zeros: [3, 3])
        #expect(throws: TensorError.shapeMismatch(argument: "c", expected: "[2, 2]", found: [3, 3])) {
            try matmul(try Tensor(zeros: [2, 2]), try Tensor(zeros: [2, 2]), into: &wrong)
        }
    }

    @Test func outputSharingAnInputByValueIsCopiedNotCorrupted() throws {
        let a = try Tensor(shape: [2, 2], values: [1, 2, 3, 4])
        let identity = try Tensor(shape: [2, 2], values: [1, 0, 0, 1])
        var c = a // shares a's storage
        try matmul(a, identity, into: &c)
        #expect(try c.scalars() == [1, 2, 3, 4])
        #expect(c.storage !== a.storage)
    }

    @Test func overlappingBorrowedOutputIsRefused() throws {
        var buffer = [Float](repeating: 1, count: 4)
        try buffer.withUnsafeMutableBytes { bytes in
            let a = try Tensor(borrowing: bytes.baseAddress!, shape: [2, 2])
            var c = try Tensor(borrowing: bytes.baseAddress!, shape: [2, 2], mutable: true)
            #expect(throws: TensorError.overlappingMemory(argument: "c", with: "a")) {
                try matmul(a, try Tensor(zeros: [2, 2]), into: &c)
            }
        }
    }

    @Test func readOnlyOutputIsRefused() throws {
        let values = [Float](repeating: 0, count: 4)
        try values.withUnsafeBytes { bytes in
            var c = try Tensor(borrowing: bytes.baseAddress!, shape: [2, 2])
            #expect(throws: TensorError.readOnly(argument: "c")) {
                try matmul(try Tensor(zeros: [2, 2]), try Tensor(zeros: [2, 2]), into: &c)
            }
        }
    }
}

/// The README's host-app snippet, kept compiling and correct.
@Test func readmeSnippetWorks() throws {
    let x = try Tensor(shape: [2, 3], values: [1, 2, 3, 4, 5, 6])
    let w = try Tensor(shape: [4, 3], values: (0..<12).map(Float.init))
    let y = try matmul(x, w, transposeB: true)
    #expect(y.shape == [2, 4])
    #expect(try y.scalars() == [8, 26, 44, 62, 17, 62, 107, 152])
    var out = try Tensor(zeros: [2, 4])
    try matmul(x, w, transposeB: true, into: &out)
    #expect(try out.scalars() == (try y.scalars()))
}

/// The README's int4 lines, kept compiling. Weights −8…7 in every block are
/// exact in Q4_1 (d = 1, m = −8), so only activation rounding remains: at
/// most half a step (amax/254) per element, times Σ|w|.
@Test func readmeQuantizedSnippetWorks() throws {
    let x = try Tensor(shape: [2, 32], values: (0..<64).map { Float($0 % 7) - 3 })
    let w = try Tensor(shape: [4, 32], values: (0..<128).map { Float(($0 * 5 + $0 / 32) % 16) - 8 })
    let w4 = try QuantizedMatrix(quantizing: w, to: .q4_1)
    let y4 = try matmul(x, w4)
    let exact = try matmul(x, w, transposeB: true)
    #expect(y4.shape == [2, 4])
    let weightSum = (0..<4).map { row in try! w.scalars()[(row * 32)..<(row * 32 + 32)].map(abs).reduce(0, +) }
    for (index, (a, b)) in zip(try y4.scalars(), try exact.scalars()).enumerated() {
        #expect(abs(a - b) <= 3.0 / 254 * weightSum[index % 4] + 1e-4, "output \(index)")
    }
}

/// The README's compute-unit lines, kept compiling.
@Test func readmeComputeUnitSnippetWorks() throws {
    let x = try Tensor(shape: [2, 32], values: (0..<64).map { Float($0 % 7) - 3 })
    let w = try Tensor(shape: [4, 32], values: (0..<128).map { Float(($0 * 5 + $0 / 32) % 16) - 8 })
    let compute = ComputeContext()
    let weights = try WeightMatrix(w, as: .q4_1)
    let result = try compute.matmul(x, weights, units: .cpuAndNeuralEngine)
    #expect(result.output.shape == [2, 4])
    #expect(result.placement.unit == (compute.isa == .scalar ? .cpu : .neuralEngine))
}

/// The README's scheduler lines, kept compiling.
@Test func readmeSchedulerSnippetWorks() async throws {
    let x = try Tensor(shape: [2, 32], values: (0..<64).map { Float($0 % 7) - 3 })
    let weights = try WeightMatrix(try Tensor(shape: [4, 32], values: (0..<128).map { Float($0 % 5) - 2 }), as: .q4_1)
    let compute = TestCompute.context
    let scheduler = InferenceScheduler(source: try SystemPower.source(override: "battery=50%"))
    let request = InferenceRequest(requirements: RequestRequirements(tier: .standard)) { decision, _ in
        try compute.matmul(x, weights, units: decision.computeUnits, precision: decision.precision, qos: decision.qos).output
    }
    let answer = try await scheduler.submit(request, tier: .standard)
    // On battery the budget allows +2 %: an unmeasured model's int4 (+2 % assumed) is the least energy.
    #expect(answer.decision.precision == .int4 && answer.decision.unit == .neuralEngine, "\(answer.decision.explanation)")
    #expect((answer.output as? Tensor)?.shape == [2, 4])
}
