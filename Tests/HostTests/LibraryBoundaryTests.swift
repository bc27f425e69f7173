import EmberTestSupport
import Foundation
import Testing

/// What libEmberC.so carries: the runtime, the models and the core, and nothing of the catalog (fetching, ZIP,
/// checksums) or the server — checked on the built library's symbol table.
@Suite("libEmberC.so boundaries")
struct LibraryBoundaryTests {
    @Test func theCLibraryLinksNoCatalogNoZIPNoServer() async throws {
        let library = ExternalProcess.productsDirectory.appendingPathComponent("libEmberC.so").path
        try #require(FileManager.default.fileExists(atPath: library), "make test builds libEmberC.so first")
        let dynamic = try await ExternalProcess.run("nm", ["-D", "--defined-only", library], timeout: 120)
        let all = try await ExternalProcess.run("nm", ["-C", library], timeout: 120)
        let needed = try await ExternalProcess.run("readelf", ["-d", library], timeout: 60)
        #expect(dynamic.status == 0 && all.status == 0 && needed.status == 0)
        let symbols = dynamic.standardOutput + all.standardOutput
        for forbidden in ["ZIPFoundation", "EmberCatalog", "EmberServer", "ModelFetcher", "WheelDownloader", "WorkerServer",
                          "SHA256Hasher"] {
            #expect(!symbols.contains(forbidden), "libEmberC.so carries \(forbidden)")
        }
        #expect(symbols.contains("ember_runtime_create") && symbols.contains("EmberModels") && symbols.contains("EmberCore"))
        #expect(!needed.standardOutput.contains("ZIPFoundation") && !needed.standardOutput.contains("EmberCatalog"))
    }
}
