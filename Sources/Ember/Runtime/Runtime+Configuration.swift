import EmberCore
import EmberModels
import Foundation

extension Runtime {
    /// How a runtime is set up. A host fills it in code; the CLI makes one from its environment with
    /// ``init(environment:computeUnits:)`` — the one place Ember's environment variables are interpreted.
    public struct Configuration: Sendable {
        /// Where the power state comes from.
        public enum Power: Sendable {
            /// The operating system (Linux sysfs, `ProcessInfo` on Darwin), or a fixed state in `EMBER_POWER`'s
            /// syntax when one is given (what the CLI passes from that variable).
            case system(override: String? = nil)
            /// A state the host sets with ``Runtime/setPowerState(_:)`` (starting from this one).
            case injected(PowerState)
            /// Any other source (a scripted timeline, say).
            case source(any PowerSource)

            /// The operating system's power state.
            public static var system: Power { .system(override: nil) }
        }

        /// Where the backends' costs come from when the runtime starts.
        public enum CalibrationMode: Sendable {
            /// The documented defaults; nothing is measured (fastest start).
            case defaults
            /// Measured now, at start (about a second on 2 cores).
            case measure
            /// Read from this file when it holds a calibration of this machine, else measured now and written there.
            case cached(URL)
        }

        /// The units Ember may use at most (Core ML's `MLComputeUnits`): the policy's ceiling.
        public var computeUnits: ComputeUnits {
            get { policy.computeUnits }
            set { policy.computeUnits = newValue }
        }
        /// Where the power state comes from; default `.system`.
        public var power: Power
        /// Where ``Runtime/loadLanguageModel(named:)`` looks for models by name; default ``ModelLocator/defaultModelsDirectory``:
        /// `models/` in the current directory when it has a manifest, else `~/.cache/ember/models`.
        public var modelsDirectory: URL
        /// The policy's thresholds and budgets.
        public var policy: PolicyConfiguration
        /// The compute context's settings: a forced kernel ISA, threads per class, the QoS mapping, the energy counter.
        public var compute: ComputeContext.Configuration
        /// Backend plugins to load at start (paths of shared libraries, `ember_plugin.h` ABI 2).
        public var pluginPaths: [String]
        /// Where the backends' costs come from; default: measured at start.
        public var calibration: CalibrationMode
        /// The model families Ember can load.
        public var architectures: ArchitectureRegistry
        /// Bytes of working memory (KV caches and buffers) the requests running at once may need together, with the
        /// weight copies the models hold (other precisions, kernel layouts — not the model files); a request beyond it
        /// waits for others to end, a route whose copies would not fit is not bound while the model has another, and
        /// a request that needs more than all of it (less the copies held) is refused. Default: a quarter of the
        /// machine's memory, or half of the process's cgroup limit when that is lower (``MemoryLimit/defaultBudget``);
        /// nil: no limit.
        public var memoryBudget: Int? = MemoryLimit.current().defaultBudget
        /// Whether generations of one model running at once decode together, one batched pass per token over all of
        /// them (their prompts still run alone). Default true; false runs each generation's passes on its own.
        public var continuousBatching = true
        /// Bytes of finished generations' KV caches kept so that a later prompt starting with the same tokens (the
        /// next turn of a conversation sent whole again, a shared system prompt) computes only the rest
        /// (``Runtime/promptCache``). Default 256 MB, at most a quarter of ``memoryBudget`` (which counts it, and
        /// releases what a request needs when that lets it start instead of waiting for memory); 0 keeps none.
        public var promptCacheBytes = 256_000_000

        /// A configuration: the default policy table unless `policy` is given; `computeUnits`,
        /// when given, sets the ceiling (else the policy's own, `.all` by default).
        public init(computeUnits: ComputeUnits? = nil, power: Power = .system,
                    modelsDirectory: URL = ModelLocator.defaultModelsDirectory, policy: PolicyConfiguration? = nil,
                    compute: ComputeContext.Configuration = ComputeContext.Configuration(), pluginPaths: [String] = [],
                    calibration: CalibrationMode = .measure, architectures: ArchitectureRegistry = .standard) {
            self.power = power
            self.modelsDirectory = modelsDirectory
            self.policy = policy ?? PolicyConfiguration(computeUnits: computeUnits ?? .all)
            if let computeUnits { self.policy.computeUnits = computeUnits }
            self.compute = compute
            self.pluginPaths = pluginPaths
            self.calibration = calibration
            self.architectures = architectures
        }

        /// The variables ``Runtime/Configuration/init(environment:computeUnits:)`` reads.
        public enum Variable {
            /// Forces a kernel ISA: scalar, avx2, avx512, neon, avx2-novnni, avx512-noamx, avx512-novnni (or auto).
            public static let isa = KernelISA.environmentVariable
            /// Backend plugins to load, separated by ":".
            public static let pluginPath = "EMBER_PLUGIN_PATH"
            /// A fixed power state, e.g. "battery=0.15,thermal=serious".
            public static let power = PowerOverride.environmentVariable
            /// The folder of the models fetched by name.
            public static let modelsDirectory = "EMBER_MODELS_DIR"
            /// Where `ember/calibration.json` is cached (else `$HOME/.cache`).
            public static let cacheHome = "XDG_CACHE_HOME"
            /// The folder that plays `/` when the performance and efficiency cores are read from `/sys` (tests).
            public static let sysfsRoot = "EMBER_SYSFS_ROOT"
        }

        /// A compute configuration forcing `isa` (nil: the best) whose workers are pinned as `topology` says.
        static func computeConfiguration(isa: String?, topology: CoreTopology) -> ComputeContext.Configuration {
            var compute = ComputeContext.Configuration(isaOverride: isa)
            compute.coreTopology = topology
            return compute
        }

        /// A configuration from environment variables (the CLI passes its process's): `EMBER_ISA`,
        /// `EMBER_PLUGIN_PATH`, `EMBER_POWER`, `EMBER_MODELS_DIR`, the cores read under `EMBER_SYSFS_ROOT` (else `/`), and the calibration cached under
        /// `$XDG_CACHE_HOME/ember/` (else `$HOME/.cache/ember/`). The library itself reads no environment.
        public init(environment: [String: String], computeUnits: ComputeUnits? = nil) {
            let nonEmpty = { (name: String) in environment[name].flatMap { $0.isEmpty ? nil : $0 } }
            let cacheBase = nonEmpty(Variable.cacheHome).map { URL(fileURLWithPath: $0, isDirectory: true) }
                ?? nonEmpty("HOME").map { URL(fileURLWithPath: $0, isDirectory: true).appendingPathComponent(".cache") }
            self.init(computeUnits: computeUnits, power: .system(override: nonEmpty(Variable.power)),
                      modelsDirectory: nonEmpty(Variable.modelsDirectory).map { URL(fileURLWithPath: $0, isDirectory: true) }
                          ?? ModelLocator.defaultModelsDirectory(currentDirectory: FileManager.default.currentDirectoryPath,
                                                                 cacheHome: cacheBase?.path),
                      compute: Self.computeConfiguration(isa: nonEmpty(Variable.isa),
                                                         topology: CoreTopology.read(sysfsRoot: nonEmpty(Variable.sysfsRoot) ?? "/")),
                      pluginPaths: (nonEmpty(Variable.pluginPath) ?? "").split(separator: ":").map(String.init),
                      calibration: cacheBase.map { .cached($0.appendingPathComponent("ember/calibration.json")) } ?? .measure)
        }
    }
}
