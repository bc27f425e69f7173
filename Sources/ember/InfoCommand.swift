import ArgumentParser
import Ember

/// `ember info`: the CPU, the kernel ISA, the BLAS library, the units and backends with their costs, and warnings.
struct InfoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show the CPU, the kernel ISA, the BLAS library, each unit and backend with what it runs and costs, and warnings.")

    @Flag(help: "Print one JSON object instead of text (objects for every dictionary, snake_case keys).")
    var json = false

    func run() throws {
        let runtime = try CommandEnvironment.runtime()
        let report = SystemReport.current(runtime: runtime, openBLASCoreType: CommandEnvironment.openBLASCoreType)
        if json {
            try printJSON(report)
        } else {
            report.lines.forEach { print($0) }
        }
    }
}
