// swift-tools-version: 6.1
//
// Ember — an embedded inference runtime: Swift on top, C kernels below.
// The manifest is grouped the way swift-numerics groups its own:
// public products, implementation details, tests, benchmarks.

import PackageDescription

// MARK: - Public API

let products: [Product] = [
    .library(name: "Ember", targets: ["Ember"]),
    .executable(name: "ember", targets: ["EmberCLI"]),
    // The C API (`Sources/EmberC/include/ember.h`) as a shared library for C and C++ hosts.
    .library(name: "EmberC", type: .dynamic, targets: ["EmberC"]),
]

// MARK: - Implementation details

let implementationTargets: [Target] = [
    // Quantized block formats, SIMD kernels and CPU-feature detection in C.
    // ISA-specific functions carry `__attribute__((target(...)))`, so the
    // target builds without unsafe flags and dispatches at run time.
    .target(
        name: "CKernels",
        path: "CKernels",
        exclude: ["x86_avx2_body.h"],
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
    // Thread ids, scheduling policies, futexes: what Glibc's Swift module lacks.
    .target(name: "_CEmberThreads", path: "Sources/_CEmberThreads"),
    .target(
        name: "Ember",
        dependencies: [
            "CKernels",
            "CBLAS",
            "_CEmberThreads",
            .product(name: "ZIPFoundation", package: "ZIPFoundation"),
        ],
        path: "Sources/Ember"
    ),
    // `ember.h`'s types, so the Swift exports below use exactly the C layout the header declares.
    .target(name: "_CEmberAPI", path: "Sources/EmberC/include", publicHeadersPath: "."),
    .target(name: "EmberC", dependencies: ["Ember", "_CEmberAPI"], path: "Sources/EmberC", exclude: ["include"]),
    .executableTarget(
        name: "EmberCLI",
        dependencies: [
            "Ember",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ],
        path: "Sources/ember"
    ),
]

// MARK: - Tests

let testTargets: [Target] = [
    .testTarget(name: "TensorTests", dependencies: ["Ember"], path: "Tests/TensorTests"),
    .testTarget(name: "KernelTests", dependencies: ["Ember", "CKernels", "CBLAS"], path: "Tests/KernelTests"),
    .testTarget(name: "ModelCatalogTests", dependencies: ["Ember"], path: "Tests/ModelCatalogTests"),
    .testTarget(name: "ThreadTests", dependencies: ["Ember", "_CEmberThreads"], path: "Tests/ThreadTests"),
    .testTarget(name: "ComputeTests", dependencies: ["Ember", "CKernels"], path: "Tests/ComputeTests"),
    // Fakes the tests share (a virtual clock); named as fakes, never used outside tests.
    .target(name: "EmberTestSupport", dependencies: ["Ember"], path: "Tests/TestSupport"),
    .testTarget(name: "PolicyTests", dependencies: ["Ember", "EmberTestSupport"], path: "Tests/PolicyTests"),
    .testTarget(name: "SchedulerTests", dependencies: ["Ember", "EmberTestSupport"], path: "Tests/SchedulerTests"),
    .testTarget(name: "ModelTests", dependencies: ["Ember", "EmberTestSupport"], path: "Tests/ModelTests",
                exclude: ["Fixtures"]),
    // The worker protocol's pieces, and `ember serve` driven by a Python client process.
    .testTarget(name: "ServiceTests", dependencies: ["Ember", "EmberTestSupport"], path: "Tests/ServiceTests",
                exclude: ["Client"]),
    // examples/ and the CLI end to end: the C host compiled with cc against libEmberC.so, `ember demo`.
    .testTarget(name: "HostTests", dependencies: ["EmberTestSupport"], path: "Tests/HostTests", exclude: ["Programs"]),
]

// MARK: - Benchmarks

let benchmarkTargets: [Target] = [
    .executableTarget(
        name: "BLASBenchmarks",
        dependencies: [
            "Ember",
            "CBLAS",
            .product(name: "Benchmark", package: "benchmark"),
        ],
        path: "Benchmarks/BLASBenchmarks",
        plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    ),
    .executableTarget(
        name: "KernelBenchmarks",
        dependencies: ["Ember", .product(name: "Benchmark", package: "benchmark")],
        path: "Benchmarks/KernelBenchmarks",
        plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
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
    ],
    targets: implementationTargets + testTargets + benchmarkTargets,
    cLanguageStandard: .c11
)
