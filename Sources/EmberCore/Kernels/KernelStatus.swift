import _CEmberKernels

extension KernelError {
    /// Throws unless a C kernel returned EK_OK; names the kernel and the argument at fault.
    static func check(_ status: ek_status, kernel: String, argument: (ek_status) -> String) throws {
        guard status != EK_OK else { return }
        throw KernelError.rejected(
            kernel: kernel, argument: argument(status), status: String(cString: ek_status_describe(status)))
    }
}
