/// Stops a generation at the first of some strings (OpenAI's `stop`) without ever streaming any part of one:
/// text that could still grow into a stop string is held back until it cannot.
///
/// Feed each decoded piece to ``append(_:)``; it returns the text that is safe to send now and whether a stop
/// string was reached (the text before it is all that is returned; the stop string and what follows are dropped).
/// At the end, ``finish()`` returns what was held back.
public struct StopSequences: Sendable {
    /// The strings that end the generation (empty ones are ignored).
    public let strings: [String]
    private var held = ""
    /// Whether a stop string has been reached.
    public private(set) var stopped = false

    /// A filter for `strings`; with none it passes every piece straight through.
    public init(_ strings: [String]) {
        self.strings = strings.filter { !$0.isEmpty }
    }

    /// The text of `piece` (and of earlier held-back text) that can be sent now; `stopped` turns true at a stop string.
    public mutating func append(_ piece: String) -> String {
        guard !stopped else { return "" }
        guard !strings.isEmpty else { return piece }
        held += piece
        // The earliest stop string in the held text ends the generation.
        if let match = strings.compactMap({ held.range(of: $0) }).min(by: { $0.lowerBound < $1.lowerBound }) {
            stopped = true
            let before = String(held[..<match.lowerBound])
            held = ""
            return before
        }
        // Hold back the longest tail that is the start of some stop string.
        var keep = 0
        for stop in strings {
            for length in stride(from: min(stop.count - 1, held.count), to: 0, by: -1)
            where length > keep && held.hasSuffix(String(stop.prefix(length))) {
                keep = length
                break
            }
        }
        let cut = held.index(held.endIndex, offsetBy: -keep)
        let ready = String(held[..<cut])
        held = String(held[cut...])
        return ready
    }

    /// The text still held back, at the end of a generation that did not stop at a stop string.
    public mutating func finish() -> String {
        defer { held = "" }
        return stopped ? "" : held
    }
}
