import CEditLine
import Foundation

/// Bracketed paste for `ember chat` at a terminal: while a line is read the terminal is asked to wrap pasted text in
/// `ESC [200~ … ESC [201~` (xterm's mode 2004), and libedit's character source is replaced by one that recognises
/// the markers: the pasted text (newlines and all) is taken whole, shown, and sent with what was typed before it as
/// one message — a multi-line paste is one turn, not one turn per line. Everything else reaches libedit byte by byte,
/// as its own source would hand it.
enum BracketedPaste {
    private static let start = Array("[200~".utf8), end = Array("\u{1B}[201~".utf8)
    /// Bytes read ahead and not yet handed to libedit. Only libedit's reading thread touches it.
    nonisolated(unsafe) private static var pending: [UInt8] = []
    /// The text of the paste that ended the line being read, if one did.
    nonisolated(unsafe) private static var pasted: String?

    /// Reads one line with libedit at `prompt`, pastes taken whole; nil at end of input.
    static func readline(_ prompt: String) -> String? {
        ember_editline_set_getc { file in BracketedPaste.nextByte(file) }
        pasted = nil
        FileHandle.standardOutput.write(Data("\u{1B}[?2004h".utf8))
        defer { FileHandle.standardOutput.write(Data("\u{1B}[?2004l".utf8)) }
        guard let raw = CEditLine.readline(prompt) else { return nil }
        defer { free(raw) }
        let typed = String(cString: raw)
        guard let paste = pasted else {
            if !typed.trimmingCharacters(in: .whitespaces).isEmpty { add_history(raw) }
            return typed
        }
        // libedit showed what was typed; the paste is shown here, continuation lines marked as the chat marks them.
        let lines = paste.split(separator: "\n", omittingEmptySubsequences: false)
        let shown = lines.enumerated().map { $0.offset == 0 ? String($0.element) : ". " + $0.element }.joined(separator: "\n")
        FileHandle.standardOutput.write(Data("\u{1B}[1A\u{1B}[\(prompt.count + typed.count)C\(shown)\n".utf8))
        return typed + paste
    }

    /// The next byte for libedit (-1 at end of input): read ahead, else from `file`. A paste's start marker makes it
    /// read the paste to its end marker, keep the text, and hand libedit a carriage return so the line ends there.
    static func nextByte(_ file: UnsafeMutablePointer<FILE>?) -> Int32 {
        if !pending.isEmpty { return Int32(pending.removeFirst()) }
        let first = getc(file)
        guard first == 0x1B else { return first == EOF ? -1 : first }
        // ESC: a paste only if "[200~" follows; any other sequence (an arrow key) is handed on as it came.
        var seen: [UInt8] = []
        for expected in start {
            let next = getc(file)
            guard next != EOF else { break }
            seen.append(UInt8(truncatingIfNeeded: next))
            if UInt8(truncatingIfNeeded: next) != expected { break }
        }
        guard seen == start else {
            pending += seen
            return first
        }
        var bytes: [UInt8] = []
        while true {
            let next = getc(file)
            if next == EOF { break }
            bytes.append(UInt8(truncatingIfNeeded: next))
            if bytes.count >= end.count, Array(bytes.suffix(end.count)) == end {
                bytes.removeLast(end.count)
                break
            }
        }
        // Terminals send a pasted line break as CR (the terminal driver may make it LF): each CR, LF or CR LF is one
        // newline; a trailing one is not a line of its own.
        var text = String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\n")
            .replacingOccurrences(of: "\r", with: "\n")
        while text.hasSuffix("\n") { text.removeLast() }
        pasted = (pasted ?? "") + text
        return 0x0D // Enter: libedit returns the typed part; readline adds the paste
    }
}
