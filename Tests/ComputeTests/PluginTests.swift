import Foundation
import Testing
@testable import Ember

/// Builds examples/plugin with the system C compiler (a real compiler invocation) and loads it.
enum PluginBuilder {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func build(defines: [String] = [], name: String) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ember-plugins-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let output = directory.appendingPathComponent("lib\(name).so").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["cc", "-O2", "-shared", "-fPIC", "-I", root.appendingPathComponent("CKernels/include").path]
            + defines.map { "-D\($0)" }
            + [root.appendingPathComponent("examples/plugin/example_plugin.c").path, "-o", output]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw KernelError.invalidArgument(argument: "cc", found: "exit \(process.terminationStatus)", expected: "0") }
        return output
    }
}

@Suite("Kernel plugins", .serialized)
struct PluginTests {
    @Test func examplePluginIsLoadedAndChosen() throws {
        let path = try PluginBuilder.build(name: "example_plugin")
        let registry = KernelRegistry()
        registry.registerBuiltIns()
        let plugin = try registry.loadPlugin(at: path)
        #expect(plugin.name == "example")
        #expect(plugin.kernels == ["example-naive-sgemm"])

        let plan = registry.plan([(.matmul, .f32)], units: .cpuOnly)
        #expect(plan.placements[0].kernel == "example-naive-sgemm")
        #expect(plan.placements[0].source?.contains("plugin example") == true)

        // Run it, and see the plugin's own call counter move.
        let handle = try #require(dlopen(path, RTLD_NOW | RTLD_NOLOAD))
        defer { dlclose(handle) }
        typealias Counter = @convention(c) () -> Int64
        let calls = unsafeBitCast(try #require(dlsym(handle, "example_plugin_calls")), to: Counter.self)
        let before = calls()
        var generator = SplitMix64(seed: 4)
        let x = try Tensor(shape: [3, 64], values: (0..<192).map { _ in generator.nextUnitFloat() })
        let wValues = try Tensor(shape: [20, 64], values: (0..<1280).map { _ in generator.nextUnitFloat() - 0.5 })
        let w = try WeightMatrix(wValues, as: .f32)
        let result = try ComputeEngine(registry: registry, routes: ComputeRoutes()).matmul(x, w, units: .cpuOnly)
        #expect(result.placement.kernel == "example-naive-sgemm")
        #expect(calls() > before)
        let expected = try matmul(x, wValues, transposeB: true).scalars()
        for (a, b) in zip(try result.output.scalars(), expected) { #expect(abs(a - b) <= 1e-4) }

        // Under units that allow the GPU route, BLAS (score 100 on the preferred unit) wins.
        #expect(registry.plan([(.matmul, .f32)], units: .all).placements[0].kernel == "openblas-sgemm")
    }

    static let broken: [(define: String, field: String)] = [
        ("BROKEN_VERSION", "abi_version"),
        ("BROKEN_SHORT_TABLE", "size"),
        ("BROKEN_SHORT_DESCRIPTOR", "kernels[0].size"),
        ("BROKEN_NULL_FUNCTION", "kernels[0].function"),
        ("BROKEN_UNKNOWN_OP", "kernels[0].op"),
    ]

    @Test(arguments: broken)
    func brokenPluginIsRefusedNamingTheField(define: String, field: String) throws {
        let path = try PluginBuilder.build(defines: [define], name: "broken_\(define.lowercased())")
        let registry = KernelRegistry()
        registry.registerBuiltIns()
        let before = registry.all.count
        let error = try #require(throws: PluginError.self) { try registry.loadPlugin(at: path) }
        guard case let .invalidField(_, found, _, _) = error else {
            Issue.record("expected invalidField, got \(error)")
            return
        }
        #expect(found == field, "\(define): \(error)")
        #expect(registry.all.count == before, "a refused plugin registers nothing")
        #expect(registry.plan([(.matmul, .f32)], units: .cpuOnly).placements[0].kernel == "portable-sgemm")
    }

    @Test func missingEntryPointAndMissingFileAreRefused() throws {
        let path = try PluginBuilder.build(defines: ["BROKEN_NO_ENTRY"], name: "broken_no_entry")
        let registry = KernelRegistry()
        #expect(throws: PluginError.missingEntryPoint(path: path)) { try registry.loadPlugin(at: path) }
        #expect(throws: PluginError.self) { try registry.loadPlugin(at: "/nonexistent/libnothing.so") }
        let notALibrary = FileManager.default.temporaryDirectory.appendingPathComponent("ember-not-a-plugin-\(getpid()).so")
        try Data("not an ELF file".utf8).write(to: notALibrary)
        #expect(throws: PluginError.self) { try registry.loadPlugin(at: notALibrary.path) }
    }

    @Test func environmentPathLoadsPluginsAndRecordsFailures() throws {
        let good = try PluginBuilder.build(name: "example_env")
        let bad = try PluginBuilder.build(defines: ["BROKEN_VERSION"], name: "broken_env")
        let registry = KernelRegistry()
        registry.loadPluginsFromEnvironment([KernelRegistry.pluginPathVariable: "\(good):\(bad)"])
        #expect(registry.plugins.map(\.path) == [good])
        #expect(registry.pluginFailures.count == 1)
        #expect(registry.pluginFailures.first?.contains("abi_version") == true)
    }
}
