import Foundation

/// Keeps the chat's terminal out of canonical (line) mode for the life of the chat, so that a key typed while a reply
/// streams or just before the prompt is ready reaches libedit as the key it is. In canonical mode the terminal driver
/// takes Ctrl-D itself: typed at an empty line it leaves an end-of-file marker that only a canonical read returns, and
/// when libedit then switched the terminal to raw mode for the prompt the marker arrived as a NUL byte — the Ctrl-D was
/// lost and the chat stayed at its prompt (the pty test's "Ctrl-D ends the chat cleanly" failed one run in two under
/// load; the chat's thread sat in libedit's read of stdin). Echo and the signal keys (Ctrl-C) stay as they were; the
/// settings found are restored when the chat ends.
final class TypeAheadTerminal {
    private var saved = termios()
    private let active: Bool

    /// Switches standard input's terminal to non-canonical mode (one byte at a time) when it is a terminal.
    init() {
        guard isatty(STDIN_FILENO) != 0, tcgetattr(STDIN_FILENO, &saved) == 0 else {
            active = false
            return
        }
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ICANON)
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        active = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0
    }

    /// Puts the terminal back as it was found.
    func restore() {
        guard active else { return }
        tcsetattr(STDIN_FILENO, TCSANOW, &saved)
    }
}
