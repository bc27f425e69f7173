import ArgumentParser
import Ember

/// `ember info`: the CPU, the kernel ISA, the BLAS library and any warnings.
struct InfoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show the CPU, its features, the kernel ISA Ember uses and the BLAS library, with warnings.")

    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    func run() throws {
        let report = SystemReport.current()
        if json {
            try printJSON(report)
        } else {
            report.lines.forEach { print($0) }
        }
    }
}
