import ArgumentParser
import Ember
import Foundation

/// The `ember` command-line tool: a thin shell over the Ember library.
@main
struct EmberCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ember",
        abstract: "Ember — an embedded inference runtime that is honest about energy.",
        version: SystemReport.emberVersion,
        subcommands: [InfoCommand.self, PlanCommand.self, FetchCommand.self, ListCommand.self, BenchCommand.self, PolicyCommand.self, GenerateCommand.self, ChatCommand.self, PerplexityCommand.self, EmbedCommand.self, SimilarityCommand.self, DemoCommand.self, ServeCommand.self])

    /// Runs the command line with each `--stop` value that begins with a dash joined to its option.
    static func main() async {
        await main(GenerateCommand.joiningDashedStopValues(Array(CommandLine.arguments.dropFirst())))
    }
}

/// Prints `value` as sorted-key JSON on standard output (on one line with `singleLine`); dates as ISO 8601.
func printJSON<Value: Encodable>(_ value: Value, singleLine: Bool = false) throws {
    let encoder = JSONEncoder()
    encoder.dateEncodingStrategy = .iso8601
    encoder.outputFormatting = singleLine ? [.sortedKeys, .withoutEscapingSlashes] : [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

/// `text` padded with spaces to `width` characters (on the left with `right`), for table columns.
func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
    let space = String(repeating: " ", count: max(0, width - text.count))
    return right ? space + text : text + space
}

/// Writes a line to standard error (progress, warnings), keeping stdout for results.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}
