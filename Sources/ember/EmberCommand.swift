import ArgumentParser
import Ember
import Foundation

/// The `ember` command-line tool: a thin shell over the Ember library.
@main
struct EmberCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ember",
        abstract: "Ember — an embedded inference runtime that is honest about energy.",
        version: SystemReport.emberVersion,
        subcommands: [InfoCommand.self, FetchCommand.self, BenchCommand.self, PolicyCommand.self, GenerateCommand.self])
}

/// Prints `value` as one line of sorted-key JSON on standard output.
func printJSON<Value: Encodable>(_ value: Value) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

/// Writes a line to standard error (progress, warnings), keeping stdout for results.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}
