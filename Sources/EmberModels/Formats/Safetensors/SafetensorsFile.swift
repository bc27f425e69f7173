import _CEmberKernels
import EmberCore
import Foundation

/// A safetensors file: an 8-byte little-endian header length, a JSON header
/// naming each tensor's dtype, shape and byte range, then the data,
/// memory-mapped and never copied until a tensor is converted.
///
/// Everything is validated before use — the header length against the
/// file, the JSON, every dtype, shape and range, that ranges lie inside the
/// data and do not overlap, and that each range holds exactly shape × dtype
/// bytes — and a bad file fails with a ``ModelFileError`` naming the tensor
/// and the values found and expected.
public final class SafetensorsFile: @unchecked Sendable {
    /// The element types Ember reads.
    public enum DType: String, Sendable, CaseIterable {
        /// IEEE floats of 32, 16 and 64 bits, and bfloat16; raw values are the header's dtype names.
        case f32 = "F32", f16 = "F16", bf16 = "BF16", f64 = "F64"
        /// Signed integers of 64 to 8 bits, unsigned 8-bit integers and 1-byte Booleans.
        case i64 = "I64", i32 = "I32", i16 = "I16", i8 = "I8", u8 = "U8", bool = "BOOL"

        /// Bytes one element occupies (1, 2, 4 or 8).
        public var byteSize: Int {
            switch self {
            case .f64, .i64: 8
            case .f32, .i32: 4
            case .f16, .bf16, .i16: 2
            case .i8, .u8, .bool: 1
            }
        }
    }

    /// One tensor of the header: name, element type, shape and byte range.
    public struct TensorInfo: Sendable, Equatable {
        /// The tensor's key in the header, e.g. `encoder.layer.0.attention.self.query.weight`.
        public var name: String
        /// The element type.
        public var dtype: DType
        /// Dimensions, outermost first (row-major, as the header lists them); empty for a scalar.
        public var shape: [Int]
        /// Byte range within the data section.
        public var range: Range<Int>
        /// Number of elements: the product of the shape (1 for a scalar).
        public var elementCount: Int { shape.reduce(1, *) }
    }

    /// The file's path as given when opening it.
    public let path: String
    /// Every tensor of the header, by name.
    public let tensors: [String: TensorInfo]
    /// `__metadata__`: free-form strings.
    public let metadata: [String: String]
    let file: MappedFile
    let dataOffset: Int

    /// The largest JSON header accepted (the format's own limit is 100 MB).
    public static let maximumHeaderBytes = 100_000_000

    /// Maps and validates the safetensors file at `path`; throws a ``ModelFileError`` if it cannot be read or is malformed.
    public convenience init(path: String) throws {
        try self.init(mapping: MappedFile(path: path))
    }

    init(mapping file: MappedFile) throws {
        self.file = file
        path = file.path
        let bytes = file.bytes
        guard bytes.count >= 8 else {
            throw ModelFileError.truncated(file: path, field: "header length", offset: 0, needed: 8, available: bytes.count)
        }
        let length = UInt64(littleEndian: bytes.loadUnaligned(as: UInt64.self))
        guard length >= 2, length <= UInt64(Self.maximumHeaderBytes), length <= UInt64(bytes.count - 8) else {
            throw ModelFileError.invalidField(file: path, field: "header length", found: "\(length)",
                                              expected: "2 to \(min(Self.maximumHeaderBytes, bytes.count - 8)) (the file has \(bytes.count) bytes)")
        }
        dataOffset = 8 + Int(length)
        let header = Data(bytes: bytes.baseAddress! + 8, count: Int(length))
        guard let object = try? JSONSerialization.jsonObject(with: header), let entries = object as? [String: Any] else {
            throw ModelFileError.invalidField(file: path, field: "header", found: "\(length) bytes that are not a JSON object",
                                              expected: "a JSON object of tensors")
        }
        let dataBytes = bytes.count - dataOffset
        var tensors: [String: TensorInfo] = [:]
        var metadata: [String: String] = [:]
        for (name, value) in entries {
            if name == "__metadata__" {
                guard let values = value as? [String: Any] else {
                    throw ModelFileError.invalidField(file: path, field: "__metadata__", found: "\(type(of: value))", expected: "an object of strings")
                }
                for (key, item) in values { metadata[key] = item as? String ?? "\(item)" }
                continue
            }
            tensors[name] = try Self.tensor(name, value, dataBytes: dataBytes, file: path)
        }
        // No two tensors may share bytes.
        let ordered = tensors.values.filter { !$0.range.isEmpty }.sorted { $0.range.lowerBound < $1.range.lowerBound }
        for (a, b) in zip(ordered, ordered.dropFirst()) where a.range.upperBound > b.range.lowerBound {
            throw ModelFileError.invalidField(file: path, field: "\(b.name).data_offsets", found: "[\(b.range.lowerBound), \(b.range.upperBound))",
                                              expected: "no overlap with \(a.name) at [\(a.range.lowerBound), \(a.range.upperBound))")
        }
        self.tensors = tensors
        self.metadata = metadata
    }

    private static func tensor(_ name: String, _ value: Any, dataBytes: Int, file: String) throws -> TensorInfo {
        func invalid(_ field: String, _ found: String, _ expected: String) -> ModelFileError {
            .invalidField(file: file, field: "\(name).\(field)", found: found, expected: expected)
        }
        guard let entry = value as? [String: Any] else { throw invalid("", "\(type(of: value))", "an object with dtype, shape, data_offsets") }
        guard let dtypeName = entry["dtype"] as? String, let dtype = DType(rawValue: dtypeName) else {
            throw invalid("dtype", "\(entry["dtype"] ?? "missing")", DType.allCases.map(\.rawValue).joined(separator: ", "))
        }
        guard let shapeValues = entry["shape"] as? [Any], shapeValues.count <= 8 else {
            throw invalid("shape", "\(entry["shape"] ?? "missing")", "a list of at most 8 dimensions")
        }
        var shape: [Int] = []
        var count = 1
        for dimension in shapeValues {
            guard let number = dimension as? NSNumber, number.doubleValue == Double(number.int64Value), number.int64Value >= 0,
                  number.int64Value <= Int64(dataBytes) else {
                throw invalid("shape", "\(shapeValues)", "non-negative integers no larger than the data")
            }
            let (product, overflow) = count.multipliedReportingOverflow(by: number.intValue)
            guard !overflow, product <= dataBytes else { throw invalid("shape", "\(shapeValues)", "at most \(dataBytes) elements in all") }
            count = product
            shape.append(number.intValue)
        }
        guard let offsets = entry["data_offsets"] as? [Any], offsets.count == 2,
              let begin = (offsets[0] as? NSNumber)?.int64Value, let end = (offsets[1] as? NSNumber)?.int64Value,
              begin >= 0, begin <= end, end <= Int64(dataBytes) else {
            throw invalid("data_offsets", "\(entry["data_offsets"] ?? "missing")", "[begin, end] with 0 ≤ begin ≤ end ≤ \(dataBytes)")
        }
        let expected = count * dtype.byteSize
        guard end - begin == Int64(expected) else {
            throw invalid("data_offsets", "\(end - begin) bytes", "\(expected) bytes (\(shape) × \(dtype.rawValue))")
        }
        return TensorInfo(name: name, dtype: dtype, shape: shape, range: Int(begin)..<Int(end))
    }

    /// The tensor called `name`, or an error naming it.
    public func tensor(_ name: String) throws -> TensorInfo {
        guard let info = tensors[name] else {
            throw ModelFileError.invalidField(file: path, field: name, found: "missing", expected: "a tensor of that name")
        }
        return info
    }

    /// The raw bytes of a tensor (mapped, not copied).
    public func bytes(of info: TensorInfo) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: file.bytes[(dataOffset + info.range.lowerBound)..<(dataOffset + info.range.upperBound)])
    }

    /// The tensor as fp32 values, converted from F32, F16 or BF16, with the shape checked.
    public func floats(_ name: String, shape expected: [Int]) throws -> [Float] {
        let info = try tensor(name)
        guard info.shape == expected else {
            throw ModelFileError.invalidField(file: path, field: "\(name).shape", found: "\(info.shape)", expected: "\(expected)")
        }
        let raw = bytes(of: info)
        let count = info.elementCount
        switch info.dtype {
        case .f32:
            return (0..<count).map { Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 4 * $0, as: UInt32.self))) }
        case .f16:
            return (0..<count).map { ek_fp16_to_fp32(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: 2 * $0, as: UInt16.self))) }
        case .bf16:
            return (0..<count).map { Float(bitPattern: UInt32(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: 2 * $0, as: UInt16.self))) << 16) }
        default:
            throw ModelFileError.invalidField(file: path, field: "\(name).dtype", found: info.dtype.rawValue, expected: "F32, F16 or BF16")
        }
    }
}
