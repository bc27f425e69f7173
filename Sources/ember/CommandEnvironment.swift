import Ember
import Foundation

/// The one place the `ember` tool reads its environment: the variables become
/// a ``Runtime/Configuration`` (`EMBER_ISA`, `EMBER_PLUGIN_PATH`, `EMBER_POWER`,
/// `EMBER_MODELS_DIR`, the calibration cache under `XDG_CACHE_HOME`), and the
/// few the tool itself uses (`OPENBLAS_CORETYPE` for `ember info`'s warning,
/// `EMBER_PYTHON` for `ember fetch`). The library reads none of them.
enum CommandEnvironment {
    /// The process's environment, read once.
    static let variables = ProcessInfo.processInfo.environment

    /// A runtime configuration from the environment, with the tool's own ceiling of units and threads.
    static func configuration(units: ComputeUnits? = nil, threads: Int? = nil) -> Runtime.Configuration {
        var configuration = Runtime.Configuration(environment: variables, computeUnits: units)
        if let threads { configuration.policy.threads = threads }
        configuration.compute.log = { printError("warning: \($0)") }
        return configuration
    }

    /// The `OPENBLAS_CORETYPE` value the process started with (OpenBLAS has read it already).
    /// The folder that plays `/` for what is read from `/sys` (`EMBER_SYSFS_ROOT`, else `/`).
    static var sysfsRoot: String {
        variables[Runtime.Configuration.Variable.sysfsRoot].flatMap { $0.isEmpty ? nil : $0 } ?? "/"
    }
    static var openBLASCoreType: String? { variables[BLASLibrary.coreTypeVariable].flatMap { $0.isEmpty ? nil : $0 } }

    /// The Python interpreter `ember fetch` runs pip with: `EMBER_PYTHON`, else `python3`.
    static var python: String { variables["EMBER_PYTHON"].flatMap { $0.isEmpty ? nil : $0 } ?? "python3" }

    /// Where models are fetched to and found by default: `EMBER_MODELS_DIR`, else `models` here when it has a manifest,
    /// else `$XDG_CACHE_HOME/ember/models` (`~/.cache/ember/models`).
    static var modelsDirectory: String { Runtime.Configuration(environment: variables).modelsDirectory.path }

    /// A runtime as the environment configures it; plugin refusals are printed to standard error (not fatal).
    static func runtime(units: ComputeUnits? = nil, threads: Int? = nil, power: Runtime.Configuration.Power? = nil) throws -> Runtime {
        var configuration = configuration(units: units, threads: threads)
        if let power { configuration.power = power }
        let runtime = try makeRuntime(configuration)
        for failure in runtime.pluginFailures { printError("warning: plugin refused: \(failure)") }
        for plugin in runtime.context.backends.plugins {
            for skipped in plugin.skipped { printError("warning: plugin \(plugin.name): backend \(skipped)") }
        }
        return runtime
    }

    /// `Runtime(configuration:)`, except that a context without room to compute (too little address space for
    /// OpenBLAS) ends the process at once with the reason: OpenBLAS's own thread is retrying its buffer allocation,
    /// and an ordinary exit would wait for that thread forever.
    static func makeRuntime(_ configuration: Runtime.Configuration) throws -> Runtime {
        do {
            return try Runtime(configuration: configuration)
        } catch let error as KernelError {
            if case .outOfMemory = error {
                printError("Error: \(error)")
                _exit(1)
            }
            throw error
        }
    }
}
