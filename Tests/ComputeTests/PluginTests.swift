import Foundation
import Testing
@testable import EmberCore
import EmberModels
import EmberTestSupport

@Suite("Backend plugins (ABI 2)", .serialized)
struct PluginTests {
    /// The example backend loads, passes Ember's checks, and takes its three ops on every route set.
    @Test func exampleBackendIsLoadedCheckedAndPlaced() throws {
        let path = try PluginBuilder.build(name: "example_backend")
        let context = ComputeContext()
        let plugin = try context.loadPlugin(at: path)
        #expect(plugin.name == "example")
        #expect(plugin.backends == ["example-c"] && plugin.skipped.isEmpty)
        for units in [ComputeUnits.cpuOnly, .cpuAndGPU, .cpuAndNeuralEngine, .all] {
            for (op, type) in [(Op.rmsNorm, TensorType.f32), (.swiglu, .f32), (.add, .f32)] {
                let placement = try #require(context.backends.place(op, type: type, units: units)?.1)
                #expect(placement.backend == "example-c" && placement.plugin, "\(op) on \(units)")
            }
            #expect(context.backends.place(.mul, type: .f32, units: units)?.1.plugin == false, "ops it does not declare stay built-in")
        }
        #expect(context.calibration.cost(backend: "example-c", OpSupport(.add, .f32))?.source == "measured")
    }

    /// In a real forward pass (the synthetic decoder) the plugin's functions run, and the logits equal the built-in
    /// backends' (its RMSNorm and add are the reference's arithmetic; SwiGLU rounds within an ulp).
    @Test func thePluginRunsInAForwardPassAndAgrees() throws {
        let path = try PluginBuilder.build(name: "example_backend_pass")
        let gguf = try SyntheticGGUF.tinyLlama().write()
        defer { try? FileManager.default.removeItem(atPath: gguf) }
        let plain = try ArchitectureRegistry.standard.loadTextGenerator(path: gguf, context: ComputeContext())
        let context = ComputeContext()
        try context.loadPlugin(at: path)
        let extended = try ArchitectureRegistry.standard.loadTextGenerator(path: gguf, context: context)
        let options = ExecutionOptions(units: .cpuAndNeuralEngine, precision: .int4, threads: 2)
        let plan = try extended.plan(options)
        #expect(Set(plan.steps.filter { $0.plugin }.map(\.op)) == [.rmsNorm, .swiglu, .add])
        let before = (0..<3).map { PluginBuilder.calls(path, op: Int32($0)) }
        let tokens = [5, 17, 3, 40, 22]
        let a = try extended.forward(tokens, session: extended.makeSession(contextLength: 8), options: options, allLogits: true).scalars()
        let b = try plain.forward(tokens, session: plain.makeSession(contextLength: 8), options: options, allLogits: true).scalars()
        for op in 0..<3 { #expect(PluginBuilder.calls(path, op: Int32(op)) > before[op], "op \(op) ran in the pass") }
        let scale = b.map(abs).max()!
        #expect(zip(a, b).allSatisfy { abs($0 - $1) <= 1e-4 * scale })
    }

    /// A backend table of ABI 2's earlier sizes (before `attention` and `geglu`, before `sequence_attention`) is
    /// still read: its ops are placed on it, the ops appended after its size stay built-in.
    @Test(arguments: ["EARLIER_SIZE_2_0", "EARLIER_SIZE_2_1"])
    func tablesOfEarlierSizesAreRead(define: String) throws {
        let path = try PluginBuilder.build(defines: [define], name: "example_\(define.lowercased())")
        let context = ComputeContext()
        let plugin = try context.loadPlugin(at: path)
        #expect(plugin.backends == ["example-c"] && plugin.skipped.isEmpty)
        for (op, type) in [(Op.rmsNorm, TensorType.f32), (.swiglu, .f32), (.add, .f32)] {
            #expect(context.backends.place(op, type: type, units: .cpuOnly)?.1.plugin == true, "\(define): \(op)")
        }
        #expect(context.backends.place(.sequenceAttention, type: .f32, units: .cpuOnly)?.1.plugin == false)
    }

    static let refused: [(define: String, field: String)] = [
        ("BROKEN_VERSION_1", "abi_version"),
        ("BROKEN_VERSION", "abi_version"),
        ("BROKEN_SHORT_TABLE", "size"),
        ("BROKEN_SHORT_BACKEND", "backends[0].size"),
        ("BROKEN_NULL_FUNCTION", "backends[0].add"),
        ("BROKEN_UNKNOWN_OP", "backends[0].supports[2].op"),
    ]

    /// A table that breaks the ABI is refused naming the field; nothing is registered.
    @Test(arguments: refused)
    func brokenTableIsRefusedNamingTheField(define: String, field: String) throws {
        let path = try PluginBuilder.build(defines: [define], name: "broken_\(define.lowercased())")
        let context = ComputeContext()
        let before = context.backends.all.count
        let error = try #require(throws: PluginError.self) { try context.loadPlugin(at: path) }
        guard case let .invalidField(_, found, _, _) = error else {
            Issue.record("expected invalidField, got \(error)")
            return
        }
        #expect(found == field, "\(define): \(error)")
        if define == "BROKEN_VERSION_1" { #expect("\(error)".contains("rebuild the plugin against ember_plugin.h version 2")) }
        #expect(context.backends.all.count == before, "a refused plugin registers nothing")
        #expect(context.backends.place(.rmsNorm, type: .f32, units: .cpuOnly)?.1.plugin == false)
        #expect(context.backends.pluginFailures.count == 1)
    }

    static let disabled: [(define: String, reason: String)] = [
        ("BROKEN_CRASH", "crashed with signal SIGSEGV"),
        ("BROKEN_ERROR", "swiglu/f32 returned 7"),
        ("BROKEN_OVERRUN", "wrote outside"),
        ("BROKEN_WRONG", "disagree with the scalar reference"),
    ]

    /// A backend that crashes, errs, writes past its output or computes wrong results during Ember's checks is
    /// disabled with the reason, and its ops fall back; the process lives on.
    @Test(arguments: disabled)
    func misbehavingBackendIsDisabledWithTheReason(define: String, reason: String) throws {
        let path = try PluginBuilder.build(defines: [define], name: "misbehaving_\(define.lowercased())")
        let context = ComputeContext()
        let plugin = try context.loadPlugin(at: path)
        #expect(plugin.backends.isEmpty)
        #expect(plugin.skipped.count == 1 && plugin.skipped[0].contains(reason), "\(define): \(plugin.skipped)")
        #expect(context.backends.health(of: "example-c")?.reason?.contains(reason) == true)
        for (op, type) in [(Op.rmsNorm, TensorType.f32), (.swiglu, .f32), (.add, .f32)] {
            #expect(context.backends.place(op, type: type, units: .cpuOnly)?.1.plugin == false, "\(op) fell back")
        }
    }

    /// A backend that starts failing in the middle of a pass is disabled there, that call falls back, and the
    /// results are the built-in backends'.
    @Test func failureDuringAPassFallsBackWithinThePass() throws {
        let path = try PluginBuilder.build(defines: ["BROKEN_RUNTIME_ERROR"], name: "failing_later")
        let gguf = try SyntheticGGUF.tinyLlama().write()
        defer { try? FileManager.default.removeItem(atPath: gguf) }
        let context = ComputeContext()
        #expect(try context.loadPlugin(at: path).backends == ["example-c"])
        let model = try ArchitectureRegistry.standard.loadTextGenerator(path: gguf, context: context)
        let plain = try ArchitectureRegistry.standard.loadTextGenerator(path: gguf, context: ComputeContext())
        let options = ExecutionOptions(units: .cpuOnly, precision: .fp32, threads: 1)
        let tokens = Array(0..<24).map { $0 * 5 % 48 }
        let a = try model.forward(tokens, session: model.makeSession(contextLength: 32), options: options, allLogits: true).scalars()
        let b = try plain.forward(tokens, session: plain.makeSession(contextLength: 32), options: options, allLogits: true).scalars()
        #expect(context.backends.health(of: "example-c")?.reason == "swiglu returned 9")
        #expect(context.backends.events.contains { $0.contains("example-c disabled") })
        let scale = b.map(abs).max()!
        #expect(zip(a, b).allSatisfy { abs($0 - $1) <= 1e-4 * scale })
        #expect(context.backends.place(.swiglu, type: .f32, units: .cpuOnly)?.1.plugin == false, "later plans skip it")
    }

    @Test func missingEntryPointAndMissingFileAreRefused() throws {
        let path = try PluginBuilder.build(defines: ["BROKEN_NO_ENTRY"], name: "broken_no_entry")
        let context = ComputeContext()
        #expect(throws: PluginError.missingEntryPoint(path: path)) { try context.loadPlugin(at: path) }
        #expect(throws: PluginError.self) { try context.loadPlugin(at: "/nonexistent/libnothing.so") }
        let notALibrary = FileManager.default.temporaryDirectory.appendingPathComponent("ember-not-a-plugin-\(getpid()).so")
        try Data("not an ELF file".utf8).write(to: notALibrary)
        defer { try? FileManager.default.removeItem(at: notALibrary) }
        #expect(throws: PluginError.self) { try context.loadPlugin(at: notALibrary.path) }
    }
}

/// The plugin ABI's matmul path — bind_weights, release_weights, activation_bytes, quantize_activations, matmul —
/// through the tests' fake backend (Tests/ComputeTests/Plugins/fake_matmul_backend.c).
@Suite("Backend plugins: the matmul path", .serialized)
struct PluginMatmulTests {
    static func build(_ defines: [String] = [], _ name: String) throws -> String {
        try PluginBuilder.build(defines: defines, name: name, source: PluginBuilder.fakeMatmul)
    }

    /// It binds every weight once at load, takes the matmuls of a cpuOnly fp32 plan, agrees with the built-in
    /// backends, and releases what it bound when the model goes.
    @Test func bindsMultipliesAndReleases() throws {
        let path = try Self.build([], "fake_matmul")
        let context = ComputeContext()
        #expect(try context.loadPlugin(at: path).backends == ["fake-matmul"])
        let gguf = try SyntheticGGUF.tinyLlama().write()
        defer { try? FileManager.default.removeItem(atPath: gguf) }
        let options = ExecutionOptions(units: .cpuOnly, precision: .fp32, threads: 2)
        let tokens = [5, 17, 3, 40, 22]
        let binds = PluginBuilder.counter(path, "fake_matmul_binds"), products = PluginBuilder.counter(path, "fake_matmul_products")
        var logits: [Float] = []
        do {
            let model = try ArchitectureRegistry.standard.loadTextGenerator(path: gguf, context: context)
            let plan = try model.plan(options)
            let matmuls = plan.steps.filter { $0.op == .matmul }
            #expect(!matmuls.isEmpty && matmuls.allSatisfy { $0.backend == "fake-matmul" && $0.plugin })
            #expect(plan.steps.contains { $0.op == .quantizeActivations && $0.backend == "fake-matmul" })
            #expect(PluginBuilder.counter(path, "fake_matmul_binds") - binds == 2 * 7 + 1, "every weight bound once, at load")
            logits = try model.forward(tokens, session: model.makeSession(contextLength: 8), options: options, allLogits: true).scalars()
            #expect(PluginBuilder.counter(path, "fake_matmul_products") > products)
        }
        #expect(PluginBuilder.counter(path, "fake_matmul_releases") >= PluginBuilder.counter(path, "fake_matmul_binds") - 1,
                "bindings released with the model (the check's own too)")
        let plain = try ArchitectureRegistry.standard.loadTextGenerator(path: gguf, context: ComputeContext())
        let expected = try plain.forward(tokens, session: plain.makeSession(contextLength: 8), options: options, allLogits: true).scalars()
        let scale = expected.map(abs).max()!
        #expect(zip(logits, expected).allSatisfy { abs($0 - $1) <= 1e-4 * scale })
    }

    static let broken: [(define: String, reason: String)] = [
        ("BROKEN_MATMUL_ERROR", "matmul/f32 returned 5"),
        ("BROKEN_MATMUL_RANGE", "wrote weight row"),
        ("BROKEN_NONLINEAR", "activation_bytes(2 rows of 32)"),
    ]

    /// A matmul that errs or writes outside its rows, or activation sizes that are not rows one after another, are
    /// caught by the check (not hidden by the fallback) and the backend is disabled with the reason.
    @Test(arguments: broken)
    func brokenMatmulIsDisabled(define: String, reason: String) throws {
        let path = try Self.build([define], "fake_\(define.lowercased())")
        let context = ComputeContext()
        let plugin = try context.loadPlugin(at: path)
        #expect(plugin.backends.isEmpty && plugin.skipped.first?.contains(reason) == true, "\(define): \(plugin.skipped)")
        #expect(context.backends.place(.matmul, type: .f32, units: .cpuOnly)?.1.plugin == false)
    }

    /// A matmul that starts failing in a forward pass is disabled there, its rows redone by the reference (with the
    /// reference's own activations), and the next pass's plan no longer places matmuls on it.
    @Test func matmulFailingInAPassFallsBack() throws {
        let path = try Self.build(["BROKEN_MATMUL_LATER"], "fake_matmul_later")
        let context = ComputeContext()
        #expect(try context.loadPlugin(at: path).backends == ["fake-matmul"])
        let gguf = try SyntheticGGUF.tinyLlama().write()
        defer { try? FileManager.default.removeItem(atPath: gguf) }
        let model = try ArchitectureRegistry.standard.loadTextGenerator(path: gguf, context: context)
        let plain = try ArchitectureRegistry.standard.loadTextGenerator(path: gguf, context: ComputeContext())
        let options = ExecutionOptions(units: .cpuOnly, precision: .fp32, threads: 1)
        let tokens = [9, 8, 7, 6]
        let a = try model.forward(tokens, session: model.makeSession(contextLength: 8), options: options, allLogits: true).scalars()
        let b = try plain.forward(tokens, session: plain.makeSession(contextLength: 8), options: options, allLogits: true).scalars()
        let scale = b.map(abs).max()!
        #expect(zip(a, b).allSatisfy { abs($0 - $1) <= 1e-4 * scale })
        #expect(context.backends.health(of: "fake-matmul")?.reason == "matmul returned 6")
        #expect(try model.plan(options).steps.filter { $0.op == .matmul }.allSatisfy { !$0.plugin }, "the next plan places around it")
    }
}
