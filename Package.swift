// swift-tools-version: 6.1
//
// Ember — an embedded inference runtime: Swift on top, C kernels below.
// The manifest is grouped the way swift-numerics groups its own: public
// products, implementation details, tests, benchmarks. Each module has one
// job, and lower layers never import higher ones:
//
//   _CEmberKernels, CBLAS, _CEmberThreads   C kernels, OpenBLAS, thread priorities
//   EmberCore        tensors, tensor types, backends and placement, threads, compute context
//   EmberModels      file formats, tokenizers, architectures (TextGenerator / Embedder)
//   Ember            policy, power, scheduler, Runtime — what hosts import (re-exports the two above)
//   EmberCatalog     fetching and checking models (pip, ZIP, SHA-256)
//   EmberServer      the JSON-lines worker protocol
//   EmberHTTP        the OpenAI HTTP API (Hummingbird 2), beside the worker protocol
//   EmberBenchmarks  the measurements behind `ember bench`
//   EmberC           the C API (libEmberC.so): Ember only — no catalog, no server

import PackageDescription

// MARK: - Public API

let products: [Product] = [
    .library(name: "Ember", targets: ["Ember"]),
    .executable(name: "ember", targets: ["EmberCLI"]),
    // The C API (`Sources/EmberC/include/ember.h`) as a shared library for C and C++ hosts.
    .library(name: "EmberC", type: .dynamic, targets: ["EmberC"]),
    .library(name: "EmberCatalog", targets: ["EmberCatalog"]),
    .library(name: "EmberServer", targets: ["EmberServer"]),
    .library(name: "EmberHTTP", targets: ["EmberHTTP"]),
]

// MARK: - Implementation details

let implementationTargets: [Target] = [
    // Quantized block formats, SIMD kernels, the built-in backends' op tables, the plugin ABI
    // (`include/ember_plugin.h`) and CPU-feature detection in C. ISA-specific functions carry
    // `__attribute__((target(...)))`, so the target builds without unsafe flags and dispatches at run time.
    .target(
        name: "_CEmberKernels",
        path: "CKernels",
        exclude: ["x86_avx2_body.h", "x86_rows_body.h", "x86_interleaved_body.h"],
        cSettings: [.headerSearchPath(".")],
        linkerSettings: [.linkedLibrary("m")]
    ),
    // OpenBLAS (cblas_*) and LAPACKE from Debian's packages; nothing else.
    .systemLibrary(
        name: "CBLAS",
        path: "Sources/CBLAS",
        pkgConfig: "openblas",
        providers: [.apt(["libopenblas-dev", "liblapacke-dev"])]
    ),
    // libedit's readline interface from Debian's libedit-dev: line editing and history for `ember chat`.
    .systemLibrary(
        name: "CEditLine",
        path: "Sources/CEditLine",
        pkgConfig: "libedit",
        providers: [.apt(["libedit-dev"])]
    ),
    // Thread ids, scheduling policies, futexes: what Glibc's Swift module lacks.
    .target(name: "_CEmberThreads", path: "Sources/_CEmberThreads"),
    .target(name: "EmberCore", dependencies: ["_CEmberKernels", "CBLAS", "_CEmberThreads"], path: "Sources/EmberCore"),
    .target(name: "EmberModels", dependencies: ["EmberCore", "_CEmberKernels"], path: "Sources/EmberModels"),
    .target(name: "Ember", dependencies: ["EmberCore", "EmberModels"], path: "Sources/Ember"),
    .target(
        name: "EmberCatalog",
        dependencies: [
            "Ember",
            "EmberModels",
            .product(name: "ZIPFoundation", package: "ZIPFoundation"),
        ],
        path: "Sources/EmberCatalog"
    ),
    .target(name: "EmberServer", dependencies: ["Ember"], path: "Sources/EmberServer"),
    .target(
        name: "EmberHTTP",
        dependencies: [
            "Ember", "EmberServer",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdCore", package: "hummingbird"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "Prometheus", package: "swift-prometheus"),
        ],
        path: "Sources/EmberHTTP"
    ),
    .target(name: "EmberBenchmarks", dependencies: ["EmberCore", "EmberModels", "_CEmberKernels", "CBLAS"],
            path: "Sources/EmberBenchmarks"),
    // `ember.h`'s types, so the Swift exports below use exactly the C layout the header declares.
    .target(name: "_CEmberAPI", path: "Sources/EmberC/include", publicHeadersPath: "."),
    .target(name: "EmberC", dependencies: ["Ember", "_CEmberAPI"], path: "Sources/EmberC", exclude: ["include"]),
    // What Ember reads from outside, as fuzz entry points; `ember-fuzz` runs them (libFuzzer or corpus replay).
    .target(name: "EmberFuzzTargets", dependencies: ["Ember", "EmberCore", "EmberModels", "EmberServer", "EmberHTTP"], path: "Sources/EmberFuzzTargets"),
    .executableTarget(name: "ember-fuzz", dependencies: ["EmberFuzzTargets"], path: "Sources/ember-fuzz"),
    // The `ember` tool's check of the address-space limit, made before Swift's runtime starts.
    .target(name: "_CEmberCLIStartup", path: "Sources/_CEmberCLIStartup"),
    .executableTarget(
        name: "EmberCLI",
        dependencies: [
            "Ember", "EmberCatalog", "EmberServer", "EmberHTTP", "EmberBenchmarks", "_CEmberCLIStartup", "_CEmberThreads", "CEditLine",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ],
        path: "Sources/ember"
    ),
]

// MARK: - Tests

let testTargets: [Target] = [
    .testTarget(name: "TensorTests", dependencies: ["EmberCore"], path: "Tests/TensorTests"),
    .testTarget(name: "KernelTests", dependencies: ["EmberCore", "Ember", "EmberBenchmarks", "EmberTestSupport", "_CEmberKernels", "CBLAS"],
                path: "Tests/KernelTests", exclude: ["Fixtures"]),
    .testTarget(name: "ModelCatalogTests", dependencies: ["EmberCatalog", "EmberModels", "EmberTestSupport"], path: "Tests/ModelCatalogTests"),
    .testTarget(name: "ThreadTests", dependencies: ["EmberCore", "Ember", "EmberBenchmarks", "EmberTestSupport", "_CEmberThreads"],
                path: "Tests/ThreadTests"),
    .testTarget(name: "ComputeTests", dependencies: ["EmberCore", "EmberModels", "Ember", "EmberTestSupport", "_CEmberKernels"],
                path: "Tests/ComputeTests", exclude: ["Plugins"]),
    // Fakes and helpers the tests share (a virtual clock, a C compiler runner); never used outside tests.
    .target(name: "EmberTestSupport", dependencies: ["Ember"], path: "Tests/TestSupport"),
    .testTarget(name: "PolicyTests", dependencies: ["Ember", "EmberTestSupport"], path: "Tests/PolicyTests"),
    .testTarget(name: "SchedulerTests", dependencies: ["Ember", "EmberTestSupport"], path: "Tests/SchedulerTests"),
    .testTarget(name: "ModelTests", dependencies: ["EmberModels", "Ember", "EmberBenchmarks", "EmberTestSupport", "_CEmberKernels"],
                path: "Tests/ModelTests", exclude: ["Fixtures"]),
    // The worker protocol's pieces, and `ember serve` driven by a Python client process.
    .testTarget(name: "ServiceTests", dependencies: ["EmberServer", "Ember", "EmberTestSupport"], path: "Tests/ServiceTests",
                exclude: ["Client"]),
    // examples/ and the CLI end to end: the C host compiled with cc against libEmberC.so, `ember demo`, plugins.
    .testTarget(name: "FuzzTests", dependencies: ["EmberFuzzTargets", "EmberCore", "EmberTestSupport"], path: "Tests/FuzzTests"),
    .testTarget(name: "HostTests", dependencies: ["EmberTestSupport"], path: "Tests/HostTests", exclude: ["Programs"]),
]

// MARK: - Benchmarks

// package-benchmark suites (`make bench-suite`). Each has its own `@main` runner instead of the package's build-tool
// plugin: SwiftPM compiled that plugin's generator tool in every clean build, `ember` alone included (~41 s of CI).
let benchmarkTargets: [Target] = [
    .executableTarget(
        name: "BLASBenchmarks",
        dependencies: [
            "EmberCore",
            "EmberBenchmarks",
            "CBLAS",
            .product(name: "Benchmark", package: "benchmark"),
        ],
        path: "Benchmarks/BLASBenchmarks"
    ),
    .executableTarget(
        name: "KernelBenchmarks",
        dependencies: ["EmberCore", .product(name: "Benchmark", package: "benchmark")],
        path: "Benchmarks/KernelBenchmarks"
    ),
]

let package = Package(
    name: "Ember",
    platforms: [.macOS(.v14)],
    products: products,
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/weichsel/ZIPFoundation", from: "0.9.19"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: implementationTargets + testTargets + benchmarkTargets,
    cLanguageStandard: .c11
)
