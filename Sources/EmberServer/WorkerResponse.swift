import Ember
import Foundation

/// Builds the lines the worker sends back: a response on one line when it is
/// small, else ordered chunks no longer than the limit, so transports with a
/// small MTU can carry each one.
enum WorkerResponse {
    /// A successful response: `{"id", "ok": true, "output", …metadata}` on one
    /// line if it fits `limit` bytes, else chunks
    /// `{"id", "chunk": n, "last": false, "output": "…"}` whose `output`
    /// strings, concatenated in order, give the output — the text itself for
    /// a string, its JSON text otherwise. The last chunk (`"last": true`)
    /// carries `ok` and the metadata.
    static func lines(id: String, output: JSONValue, metadata: [(String, JSONValue)], limit: Int) -> [String] {
        let whole = JSONValue.object([("id", .string(id)), ("ok", .bool(true)), ("output", output)] + metadata).text
        if whole.utf8.count <= limit { return [whole] }

        let text: String = if case let .string(string) = output { string } else { output.text }
        let scalars = Array(text.unicodeScalars)
        let sizes = scalars.map { JSONValue.escaped($0).utf8.count }
        var remaining = sizes.reduce(0, +)
        func chunk(_ index: Int, last: Bool, _ piece: String) -> JSONValue {
            .object([("id", .string(id)), ("chunk", .number(Double(index))), ("last", .bool(last)), ("output", .string(piece))]
                + (last ? [("ok", .bool(true))] + metadata : []))
        }
        var lines: [String] = []
        var start = 0
        while true {
            let index = lines.count
            if chunk(index, last: true, "").byteCount + remaining <= limit || start == scalars.count {
                lines.append(chunk(index, last: true, Self.string(scalars[start...])).text)
                return lines
            }
            let budget = limit - chunk(index, last: false, "").byteCount
            var end = start
            var used = 0
            while end < scalars.count, used + sizes[end] <= budget || end == start {
                used += sizes[end]
                end += 1
            }
            lines.append(chunk(index, last: false, Self.string(scalars[start..<end])).text)
            remaining -= used
            start = end
        }
    }

    /// An embedding response: `{"id", "ok": true, "output": [[…], …], …metadata}` on one line if it fits `limit`
    /// bytes, else chunks of numbers, never of text — `{"id", "chunk": n, "last": false, "index": i, "offset": k,
    /// "values": […]}` carrying vector `i` from element `k`: a whole vector when one fits the limit, else consecutive
    /// slices of it — then `{"id", "chunk": n, "last": true, "ok": true, "count", …metadata}`.
    static func vectorLines(id: String, vectors: [[Float]], metadata: [(String, JSONValue)], limit: Int) -> [String] {
        let whole = JSONValue.object([("id", .string(id)), ("ok", .bool(true)),
                                      ("output", .array(vectors.map { .array($0.map(JSONValue.float)) }))] + metadata).text
        if whole.utf8.count <= limit { return [whole] }
        var lines: [String] = []
        func slice(_ index: Int, _ offset: Int, _ values: ArraySlice<Float>) -> String {
            JSONValue.object([("id", .string(id)), ("chunk", .number(Double(lines.count))), ("last", .bool(false)),
                              ("index", .number(Double(index))), ("offset", .number(Double(offset))),
                              ("values", .array(values.map(JSONValue.float)))]).text
        }
        for (index, vector) in vectors.enumerated() {
            var offset = 0
            repeat {
                // As many values as fit: the empty slice's bytes, then each number and its comma.
                var budget = limit - slice(index, offset, []).utf8.count
                var end = offset
                while end < vector.count {
                    let size = JSONValue.float(vector[end]).text.utf8.count + (end > offset ? 1 : 0)
                    guard size <= budget || end == offset else { break }
                    budget -= size
                    end += 1
                }
                lines.append(slice(index, offset, vector[offset..<end]))
                offset = end
            } while offset < vector.count
        }
        lines.append(JSONValue.object([("id", .string(id)), ("chunk", .number(Double(lines.count))), ("last", .bool(true)),
                                       ("ok", .bool(true)), ("count", .number(Double(vectors.count)))] + metadata).text)
        return lines
    }

    /// `{"id", "ok": false, "error"}` (`id` null when the request's id is unknown); a message too long for
    /// `limit` bytes is cut at a character boundary and ends with "…".
    static func error(id: String?, _ message: String, limit: Int = .max) -> String {
        func line(_ text: String) -> String {
            JSONValue.object([("id", id.map(JSONValue.string) ?? .null), ("ok", .bool(false)), ("error", .string(text))]).text
        }
        var whole = line(message)
        guard whole.utf8.count > limit else { return whole }
        var scalars = Array(message.unicodeScalars)
        while !scalars.isEmpty, whole.utf8.count > limit {
            scalars.removeLast(max(1, min(scalars.count, (whole.utf8.count - limit) / 6)))
            whole = line(Self.string(scalars) + "…")
        }
        // Only an id too long to echo is left (the parser refuses those, so this is a last resort).
        if whole.utf8.count > limit, id != nil { return error(id: nil, message, limit: limit) }
        return whole
    }

    /// A decision as the protocol reports it.
    private static func string(_ scalars: some Sequence<Unicode.Scalar>) -> String {
        var string = ""
        string.unicodeScalars.append(contentsOf: scalars)
        return string
    }
}

extension JSONValue {
    /// A policy decision as both servers report it: action, precision ("native" for the weights as stored), the unit
    /// chosen and the units allowed, QoS class and threads; `detailed` (the HTTP API) adds the prediction (seconds,
    /// joules, quality loss) and the reason — the worker protocol's lines stay within its 512-byte chunks.
    public static func decision(_ decision: Decision, detailed: Bool = false) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("action", .string(decision.action.name)), ("precision", .string(decision.precisionName)),
            ("unit", .string(decision.unit.rawValue)), ("units", .string(decision.computeUnits.description)),
            ("qos", .string(decision.qos.description)), ("threads", .number(Double(decision.threads))),
        ]
        if detailed, let predicted = decision.predicted {
            fields.append(("predicted", .object([("seconds", .number(predicted.seconds)), ("joules", .number(predicted.joules)),
                                                 ("quality_loss", .number(predicted.qualityLoss))])))
        }
        if detailed, !decision.explanation.isEmpty { fields.append(("reason", .string(decision.explanation))) }
        return .object(fields)
    }
}
