import Foundation

/// Builds examples/plugins/example_backend.c with the system C compiler (a real compiler invocation), plain or
/// with one of its BROKEN_* variants.
public enum PluginBuilder {
    /// The example backend's source.
    public static let source = ExternalProcess.repositoryRoot.appendingPathComponent("examples/plugins/example_backend.c")

    /// The tests' fake matmul backend.
    public static let fakeMatmul = ExternalProcess.repositoryRoot.appendingPathComponent("Tests/ComputeTests/Plugins/fake_matmul_backend.c")

    /// Compiles `source` (the example by default) with `defines` into `lib<name>.so` in a temporary folder; returns its path.
    public static func build(defines: [String] = [], name: String, source: URL = PluginBuilder.source) throws -> String {
        let directory = Self.directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        _ = removedAtExit
        let output = directory.appendingPathComponent("lib\(name).so").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["cc", "-std=c11", "-O2", "-shared", "-fPIC",
                             "-I", ExternalProcess.repositoryRoot.appendingPathComponent("CKernels/include").path]
            + defines.map { "-D\($0)" } + [source.path, "-o", output, "-lm"]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw NSError(domain: "PluginBuilder", code: Int(process.terminationStatus),
                          userInfo: [NSLocalizedDescriptionKey: "cc exited with \(process.terminationStatus) building \(name)"])
        }
        return output
    }

    /// This process's folder of built libraries.
    static var directory: URL { FileManager.default.temporaryDirectory.appendingPathComponent("ember-plugins-\(getpid())") }

    /// Asks, once, for ``directory`` to be removed when the process exits (loaded libraries stay mapped).
    private static let removedAtExit: Void = { atexit { try? FileManager.default.removeItem(at: PluginBuilder.directory) } }()

    /// A counter the library at `path` exports as `int64_t symbol(void)`.
    public static func counter(_ path: String, _ symbol: String) -> Int64 {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD) else { return -1 }
        defer { dlclose(handle) }
        typealias Counter = @convention(c) () -> Int64
        guard let function = dlsym(handle, symbol) else { return -1 }
        return unsafeBitCast(function, to: Counter.self)()
    }

    /// The example's call counter for op 0 (RMSNorm), 1 (SwiGLU) or 2 (softmax), read from the loaded library at `path`.
    public static func calls(_ path: String, op: Int32) -> Int64 {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD) else { return -1 }
        defer { dlclose(handle) }
        typealias Counter = @convention(c) (Int32) -> Int64
        guard let symbol = dlsym(handle, "example_backend_calls") else { return -1 }
        return unsafeBitCast(symbol, to: Counter.self)(op)
    }
}
