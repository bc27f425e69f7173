import EmberCore
import Foundation

/// A GGUF model file (versions 2 and 3), memory-mapped: header, metadata,
/// tensor infos and the tensor data, which is never copied.
///
/// Everything is validated before use — magic, version, counts against the
/// bytes left, string and array lengths, dimensions, type ids, alignment,
/// offsets, and that every tensor lies inside the file and overlaps no
/// other — and a failure is a ``ModelFileError`` naming the field and the
/// values found and expected.
public final class GGUFFile: @unchecked Sendable {
    /// One tensor's description and where its bytes are.
    public struct TensorInfo: Sendable, Equatable {
        /// The tensor's name, e.g. `blk.0.attn_q.weight`.
        public let name: String
        /// Dimensions innermost first, as GGUF stores them (`ne[0]` is a row's length).
        public let dimensions: [Int]
        /// The tensor's element or block-quantized type.
        public let type: TensorType
        /// Offset from the start of the data section.
        public let offset: Int
        /// Size of the tensor's data in bytes.
        public let byteCount: Int

        /// Number of elements: the product of the dimensions.
        public var elementCount: Int { dimensions.reduce(1, *) }
    }

    /// The file's path as given when opening it.
    public let path: String
    /// The GGUF format version, 2 or 3.
    public let version: UInt32
    /// The metadata key-value pairs, e.g. `general.architecture`.
    public let metadata: [String: GGUFValue]
    /// Tensors in file order.
    public let tensors: [TensorInfo]
    /// Byte alignment of the data section and tensor offsets (`general.alignment`, 32 when absent).
    public let alignment: Int
    /// Where the data section starts in the file.
    public let dataOffset: Int
    let file: MappedFile
    private let index: [String: Int]
    /// Where the copies made from this file's matrices (packed, interleaved, dequantized) come from: huge pages
    /// shared by the model's matrices (``HugePageArena``).
    let copyArena = HugePageArena()

    /// The first four bytes of every GGUF file, "GGUF" read as a little-endian integer.
    public static let magic: UInt32 = 0x4655_4747 // "GGUF" read little-endian

    /// Maps and validates the GGUF file at `path`; throws a ``ModelFileError`` if it cannot be read or is malformed.
    public convenience init(path: String) throws {
        try self.init(mapping: MappedFile(path: path))
    }

    init(mapping file: MappedFile) throws {
        self.file = file
        path = file.path
        var reader = GGUFReader(bytes: file.bytes, file: file.path)
        let magic = try reader.u32("magic")
        guard magic == Self.magic else {
            throw ModelFileError.invalidField(file: path, field: "magic", found: String(format: "0x%08x", magic),
                                              expected: "0x46554747 (\"GGUF\")")
        }
        version = try reader.u32("version")
        guard version == 2 || version == 3 else {
            throw ModelFileError.invalidField(file: path, field: "version", found: "\(version)", expected: "2 or 3")
        }
        let tensorCount = try reader.count("tensor_count", minimumBytesEach: 8 + 4 + 8 + 4 + 8)
        let kvCount = try reader.count("metadata_kv_count", minimumBytesEach: 8 + 4 + 1)

        var metadata: [String: GGUFValue] = [:]
        for index in 0..<kvCount {
            let key = try reader.string("metadata[\(index)].key")
            guard metadata[key] == nil else {
                throw ModelFileError.invalidField(file: path, field: "metadata[\(index)].key", found: key, expected: "a key used once")
            }
            let type = try reader.u32("metadata[\(key)].type")
            metadata[key] = try reader.value(type: type, field: "metadata[\(key)]", depth: 0)
        }
        self.metadata = metadata

        var alignment = 32
        if let value = metadata["general.alignment"] {
            guard let number = value.integer, number > 0, number <= 1 << 16, number & (number - 1) == 0 else {
                throw ModelFileError.invalidField(file: path, field: "general.alignment", found: "\(value)", expected: "a power of two ≤ 65536")
            }
            alignment = number
        }
        self.alignment = alignment

        var infos: [TensorInfo] = []
        var names: [String: Int] = [:]
        var pending: [(name: String, dims: [Int], type: TensorType, offset: Int)] = []
        for index in 0..<tensorCount {
            let name = try reader.string("tensors[\(index)].name")
            guard names[name] == nil else {
                throw ModelFileError.invalidField(file: path, field: "tensors[\(index)].name", found: name, expected: "a name used once")
            }
            names[name] = index
            let rank = try reader.u32("tensors[\(name)].n_dims")
            guard (1...4).contains(rank) else {
                throw ModelFileError.invalidField(file: path, field: "tensors[\(name)].n_dims", found: "\(rank)", expected: "1…4")
            }
            var dims: [Int] = []
            for axis in 0..<Int(rank) {
                let dim = try reader.u64("tensors[\(name)].dims[\(axis)]")
                guard dim > 0, dim <= 1 << 40 else {
                    throw ModelFileError.invalidField(file: path, field: "tensors[\(name)].dims[\(axis)]", found: "\(dim)", expected: "1…2⁴⁰")
                }
                dims.append(Int(dim))
            }
            let typeID = try reader.u32("tensors[\(name)].type")
            guard let type = TensorType(ggufID: typeID) else {
                throw ModelFileError.invalidField(file: path, field: "tensors[\(name)].type", found: "\(typeID)",
                                                  expected: "a GGML type id Ember knows (\(TensorType.table.map { String($0.id) }.joined(separator: ", ")))")
            }
            let offset = try reader.u64("tensors[\(name)].offset")
            guard offset <= UInt64(file.bytes.count), Int(offset) % alignment == 0 else {
                throw ModelFileError.invalidField(file: path, field: "tensors[\(name)].offset", found: "\(offset)",
                                                  expected: "a multiple of \(alignment) inside the file")
            }
            pending.append((name, dims, type, Int(offset)))
        }
        dataOffset = (reader.position + alignment - 1) / alignment * alignment
        let dataBytes = file.bytes.count - dataOffset
        guard dataBytes >= 0 else {
            throw ModelFileError.truncated(file: path, field: "data section", offset: reader.position, needed: dataOffset - reader.position,
                                           available: file.bytes.count - reader.position)
        }
        for tensor in pending {
            guard tensor.dims[0] % tensor.type.blockSize == 0 else {
                throw ModelFileError.invalidField(file: path, field: "tensors[\(tensor.name)].dims[0]", found: "\(tensor.dims[0])",
                                                  expected: "a multiple of \(tensor.type.name)'s block size \(tensor.type.blockSize)")
            }
            var elements = 1
            for dim in tensor.dims {
                let (product, overflow) = elements.multipliedReportingOverflow(by: dim)
                guard !overflow, product <= 1 << 42 else {
                    throw ModelFileError.invalidField(file: path, field: "tensors[\(tensor.name)].dims", found: "\(tensor.dims)",
                                                      expected: "at most 2⁴² elements")
                }
                elements = product
            }
            let bytes = elements / tensor.type.blockSize * tensor.type.blockBytes
            guard tensor.offset <= dataBytes, bytes <= dataBytes - tensor.offset else {
                throw ModelFileError.invalidField(file: path, field: "tensors[\(tensor.name)]",
                                                  found: "bytes \(tensor.offset)…\(tensor.offset + bytes) of the data section",
                                                  expected: "within its \(dataBytes) bytes")
            }
            infos.append(TensorInfo(name: tensor.name, dimensions: tensor.dims, type: tensor.type, offset: tensor.offset, byteCount: bytes))
        }
        let sorted = infos.sorted { $0.offset < $1.offset }
        for (previous, next) in zip(sorted, sorted.dropFirst()) where previous.offset + previous.byteCount > next.offset && next.byteCount > 0 {
            throw ModelFileError.invalidField(file: path, field: "tensors[\(next.name)].offset", found: "\(next.offset)",
                                              expected: "≥ \(previous.offset + previous.byteCount) (after \(previous.name))")
        }
        // Tensors lie back to back, each padded to the alignment: a longer gap means a tensor's type or shape says
        // fewer bytes than the file holds for it (a Q8_0 tensor relabelled Q4_0 would read half its bytes as garbage).
        let ends = zip(sorted, sorted.dropFirst().map(\.offset) + [dataBytes])
        for (tensor, nextStart) in ends where nextStart - (tensor.offset + tensor.byteCount) >= alignment {
            throw ModelFileError.invalidField(
                file: path, field: "tensors[\(tensor.name)].type",
                found: "\(tensor.type) \(tensor.dimensions), which takes \(tensor.byteCount) bytes, but the file holds \(nextStart - tensor.offset) for it",
                expected: "a type and shape that fill the tensor's bytes (padding < \(alignment)); the file is damaged or relabelled — re-convert it")
        }
        tensors = infos
        index = names
    }

    /// The tensor called `name`.
    public func tensor(_ name: String) throws -> TensorInfo {
        guard let position = index[name] else {
            throw ModelFileError.invalidField(file: path, field: "tensors", found: "no tensor \(name.debugDescription)", expected: "one")
        }
        return tensors[position]
    }

    /// The tensor's bytes, borrowed from the mapping (kept alive by this file object).
    public func bytes(of tensor: TensorInfo) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: file.bytes[(dataOffset + tensor.offset)..<(dataOffset + tensor.offset + tensor.byteCount)])
    }

    /// A weight tensor as a `WeightMatrix` borrowing the mapped bytes: rows = dims[1], columns = dims[0].
    public func weightMatrix(_ name: String) throws -> WeightMatrix {
        let info = try tensor(name)
        guard info.type.canDequantize else {
            throw ModelFileError.invalidField(
                file: path, field: "tensors[\(name)].type", found: "\(info.type.name) (GGUF type \(info.type.id)), which Ember does not compute with yet",
                expected: "one of \(TensorType.computable.uppercased()); re-quantize the file to one of them, e.g. "
                    + "`llama-quantize --allow-requantize \((path as NSString).lastPathComponent) out.gguf Q4_K_M`")
        }
        guard info.dimensions.count == 2 else {
            throw ModelFileError.invalidField(file: path, field: "tensors[\(name)]", found: "\(info.type.name) \(info.dimensions)",
                                              expected: "a 2-D matrix")
        }
        return try WeightMatrix(type: info.type, rows: info.dimensions[1], columns: info.dimensions[0], borrowing: bytes(of: info), owner: file,
                                copyArena: copyArena, mapped: true)
    }

    /// A metadata value that must be there.
    public func require(_ key: String) throws -> GGUFValue {
        guard let value = metadata[key] else {
            throw ModelFileError.invalidField(file: path, field: key, found: "missing", expected: "present")
        }
        return value
    }
}

/// Reads GGUF's little-endian fields with bounds checks.
struct GGUFReader {
    let bytes: UnsafeRawBufferPointer
    let file: String
    var position = 0

    var remaining: Int { bytes.count - position }

    mutating func take(_ count: Int, _ field: @autoclosure () -> String) throws -> UnsafeRawBufferPointer {
        guard count >= 0, count <= remaining else {
            throw ModelFileError.truncated(file: file, field: field(), offset: position, needed: count, available: remaining)
        }
        defer { position += count }
        return UnsafeRawBufferPointer(rebasing: bytes[position..<(position + count)])
    }

    mutating func load<T: FixedWidthInteger>(_ type: T.Type, _ field: @autoclosure () -> String) throws -> T {
        T(littleEndian: try take(MemoryLayout<T>.size, field()).loadUnaligned(as: T.self))
    }

    mutating func u32(_ field: @autoclosure () -> String) throws -> UInt32 { try load(UInt32.self, field()) }
    mutating func u64(_ field: @autoclosure () -> String) throws -> UInt64 { try load(UInt64.self, field()) }

    /// A count of things that each take at least `minimumBytesEach` bytes: never more than the file could hold.
    mutating func count(_ field: @autoclosure () -> String, minimumBytesEach: Int) throws -> Int {
        let value = try u64(field())
        guard value <= UInt64(remaining / max(1, minimumBytesEach)) else {
            throw ModelFileError.invalidField(file: file, field: field(), found: "\(value)",
                                              expected: "at most \(remaining / max(1, minimumBytesEach)) (what \(remaining) bytes can hold)")
        }
        return Int(value)
    }

    mutating func string(_ field: @autoclosure () -> String) throws -> String {
        let length = try u64("\(field()).length")
        guard length <= UInt64(remaining) else {
            throw ModelFileError.truncated(file: file, field: field(), offset: position, needed: Int(clamping: length), available: remaining)
        }
        let raw = try take(Int(length), field())
        guard let text = String(validating: raw, as: UTF8.self) else {
            throw ModelFileError.invalidField(file: file, field: field(), found: "\(length) bytes that are not UTF-8", expected: "UTF-8 text")
        }
        return text
    }

    mutating func value(type: UInt32, field: @autoclosure () -> String, depth: Int) throws -> GGUFValue {
        switch type {
        case 0: return .uint8(try load(UInt8.self, field()))
        case 1: return .int8(try load(Int8.self, field()))
        case 2: return .uint16(try load(UInt16.self, field()))
        case 3: return .int16(try load(Int16.self, field()))
        case 4: return .uint32(try load(UInt32.self, field()))
        case 5: return .int32(try load(Int32.self, field()))
        case 6: return .float32(Float(bitPattern: try load(UInt32.self, field())))
        case 7:
            let raw = try load(UInt8.self, field())
            guard raw <= 1 else { throw ModelFileError.invalidField(file: file, field: field(), found: "\(raw)", expected: "a bool (0 or 1)") }
            return .bool(raw == 1)
        case 8: return .string(try string(field()))
        case 9:
            guard depth == 0 else { throw ModelFileError.invalidField(file: file, field: field(), found: "an array of arrays", expected: "one level of array") }
            let elementType = try u32("\(field()).element_type")
            let minimum: Int = switch elementType {
            case 0, 1, 7: 1
            case 2, 3: 2
            case 4, 5, 6: 4
            case 8: 8
            case 10, 11, 12: 8
            default: throw ModelFileError.invalidField(file: file, field: "\(field()).element_type", found: "\(elementType)", expected: "0…8 or 10…12")
            }
            let count = try self.count("\(field()).count", minimumBytesEach: minimum)
            var items: [GGUFValue] = []
            items.reserveCapacity(count)
            for index in 0..<count { items.append(try value(type: elementType, field: "\(field())[\(index)]", depth: 1)) }
            return .array(items)
        case 10: return .uint64(try load(UInt64.self, field()))
        case 11: return .int64(try load(Int64.self, field()))
        case 12: return .float64(Double(bitPattern: try load(UInt64.self, field())))
        default:
            throw ModelFileError.invalidField(file: file, field: "\(field()).type", found: "\(type)", expected: "a GGUF value type 0…12")
        }
    }
}
