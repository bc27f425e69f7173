import Foundation

extension Runtime {
    /// Loads a kernel plugin (a shared library exporting `ember_plugin_entry`,
    /// see `CKernels/include/ember_plugin.h`) into the kernel registry every
    /// model uses; its kernels compete by score from the next plan on. A bad
    /// library throws a ``PluginError`` naming the field and nothing is registered.
    @discardableResult
    public func loadPlugin(at path: String) throws -> LoadedPlugin {
        try KernelRegistry.shared.loadPlugin(at: path)
    }
}
