/// Why a kernel plugin was refused. Each case names the library and the
/// field at fault with the value found and the value expected; a refused
/// plugin registers nothing and the rest of Ember keeps working.
public enum PluginError: Error, Equatable, CustomStringConvertible {
    /// The shared library could not be loaded.
    case cannotOpen(path: String, reason: String)
    /// It does not export `ember_plugin_entry`.
    case missingEntryPoint(path: String)
    /// A field holds something other than what the ABI allows.
    case invalidField(path: String, field: String, found: String, expected: String)

    /// One line naming the library path and what is wrong, e.g. "PATH: exports no ember_plugin_entry".
    public var description: String {
        switch self {
        case let .cannotOpen(path, reason):
            "\(path): cannot load plugin: \(reason)"
        case let .missingEntryPoint(path):
            "\(path): exports no ember_plugin_entry"
        case let .invalidField(path, field, found, expected):
            "\(path): \(field) is \(found), expected \(expected)"
        }
    }
}
