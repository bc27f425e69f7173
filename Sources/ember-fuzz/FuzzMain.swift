import EmberFuzzTargets
import Foundation

// Two builds of one program. Built with `-sanitize=fuzzer -D EMBER_LIBFUZZER` (`make fuzz`), libFuzzer is the
// main program and calls the entry point below with the target `EMBER_FUZZ_TARGET` names. Built plainly, it
// replays inputs: `ember-fuzz TARGET [--mutations N] [--seed S] FILE_OR_FOLDER…` runs each file, then N random
// mutations of them (bytes flipped, inserted, removed, copied between inputs, numbers set to extremes).

/// The repository root (this file is Sources/ember-fuzz/FuzzMain.swift).
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

#if EMBER_LIBFUZZER
nonisolated(unsafe) var target = FuzzTarget.gguf
nonisolated(unsafe) var environment: FuzzTarget.Environment?

@_cdecl("LLVMFuzzerInitialize")
func fuzzerInitialize(_ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>) -> Int32 {
    let name = ProcessInfo.processInfo.environment["EMBER_FUZZ_TARGET"] ?? ""
    guard let chosen = FuzzTarget(rawValue: name) else {
        FileHandle.standardError.write(Data("EMBER_FUZZ_TARGET=\(name): expected one of \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))\n".utf8))
        exit(2)
    }
    target = chosen
    environment = FuzzTarget.Environment(repositoryRoot: repositoryRoot)
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    target.run(data.map { Data(bytes: $0, count: size) } ?? Data(), in: environment!)
    return 0
}

@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(_ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                     _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

/// The program's entry (SwiftPM links an executable's `main` to `<module>_main`): libFuzzer's driver.
@_cdecl("ember_fuzz_main")
func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    var count = argc
    var vector: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = argv
    return runFuzzerDriver(&count, &vector) { data, size in fuzzerTestOneInput(data, size) }
}
#else
@main
struct FuzzReplay {
    static func main() {
        var arguments = Array(CommandLine.arguments.dropFirst())
        guard let name = arguments.first, let target = FuzzTarget(rawValue: name) else {
            FileHandle.standardError.write(Data("usage: ember-fuzz TARGET [--mutations N] [--seed S] FILE_OR_FOLDER…\n  TARGET: \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))\n".utf8))
            exit(2)
        }
        arguments.removeFirst()
        var mutations = 0, seed: UInt64 = 1, paths: [String] = []
        while let argument = arguments.first {
            arguments.removeFirst()
            switch argument {
            case "--mutations": mutations = Int(arguments.first ?? "") ?? 0; arguments = Array(arguments.dropFirst())
            case "--seed": seed = UInt64(arguments.first ?? "") ?? 1; arguments = Array(arguments.dropFirst())
            default: paths.append(argument)
            }
        }
        let inputs = paths.flatMap(FuzzCorpus.files(at:)).compactMap { FileManager.default.contents(atPath: $0) }
        let report = FuzzCorpus.replay(target, inputs: inputs, mutations: mutations, seed: seed,
                                       environment: FuzzTarget.Environment(repositoryRoot: repositoryRoot))
        print("\(target.rawValue): \(report.inputs) inputs and \(report.mutations) mutations in \(String(format: "%.1f", report.seconds)) s, no crash")
    }
}
#endif
