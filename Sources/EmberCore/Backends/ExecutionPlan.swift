/// How one request's work runs: the units it may use, the precision of the
/// weights, its threads and QoS class. The runtime turns a policy decision
/// into these; a model binds its weights once per (units, precision).
public struct ExecutionOptions: Sendable, Hashable {
    /// The units the work may use; the backends are chosen within them, the CPU route always last.
    public var units: ComputeUnits
    /// The weights' precision; nil runs the model file's own types.
    public var precision: Precision?
    /// Threads a forward pass runs on (at most the context's per class). A decoder session's single-token steps may
    /// run on one instead when one measured faster (another process holding a core: see `StepThreadChooser`).
    public var threads: Int
    /// The QoS class the work runs at.
    public var qos: QoSClass

    /// Options; the defaults run the file's own types on every unit, on every core, at the caller's class.
    public init(units: ComputeUnits = .all, precision: Precision? = nil, threads: Int = KernelThreads.default,
                qos: QoSClass = .current) {
        self.units = units
        self.precision = precision
        self.threads = max(1, threads)
        self.qos = qos
    }
}

/// Where every op of a model's forward pass runs, and why — Core ML's
/// `MLComputePlan`, for Ember: what `ember plan` prints.
public struct ExecutionPlan: Sendable, Codable {
    /// One op of the pass.
    public struct Step: Sendable, Codable, Equatable {
        /// The operation.
        public var op: Op
        /// The decoder or encoder block it belongs to, nil for the steps before and after the blocks.
        public var layer: Int?
        /// What it does in the model, e.g. "attn_q", "ffn_down", "attn_norm".
        public var role: String
        /// The backend that runs it.
        public var backend: String
        /// Whether that backend came from a plugin.
        public var plugin: Bool
        /// The route it runs on.
        public var unit: ComputeUnit
        /// The type it runs on (weights for matmul and embedding, the KV cache for attention, else f32).
        public var type: TensorType
        /// The precision class of that type.
        public var precision: Precision?
        /// Why it is not on the most preferred unit allowed, and any conversion of the weights; nil when it runs there as stored.
        public var fallbackReason: String?

        /// A step for `placement`, in `layer`, doing `role`.
        public init(_ placement: Placement, layer: Int?, role: String) {
            op = placement.op
            self.layer = layer
            self.role = role
            backend = placement.backend
            plugin = placement.plugin
            unit = placement.unit
            type = placement.type
            precision = placement.type.precision
            fallbackReason = placement.fallbackReason
        }

        enum CodingKeys: String, CodingKey {
            case op, layer, role, backend, plugin, unit, type, precision
            case fallbackReason = "fallback_reason"
        }
    }

    /// The units the plan was made for.
    public var units: ComputeUnits
    /// The precision asked for; nil: the file's own types.
    public var precision: Precision?
    /// The route the pass runs on: the one with most of the arithmetic.
    public var route: ComputeUnit
    /// Every op of one pass, in order.
    public var steps: [Step]
    /// Modelled joules for one token (decoders) or one token of input (encoders), from the calibrated costs.
    public var joulesPerToken: Double

    /// A plan; see each property.
    public init(units: ComputeUnits, precision: Precision?, route: ComputeUnit, steps: [Step], joulesPerToken: Double) {
        self.units = units
        self.precision = precision
        self.route = route
        self.steps = steps
        self.joulesPerToken = joulesPerToken
    }

    /// The backends the plan uses, each with the op kinds it runs.
    public var backendsUsed: [(backend: String, ops: [Op])] {
        var order: [String] = []
        var ops: [String: [Op]] = [:]
        for step in steps {
            if ops[step.backend] == nil { order.append(step.backend) }
            if !(ops[step.backend]?.contains(step.op) ?? false) { ops[step.backend, default: []].append(step.op) }
        }
        return order.map { ($0, ops[$0] ?? []) }
    }

    enum CodingKeys: String, CodingKey {
        case units, precision, route, steps
        case joulesPerToken = "joules_per_token"
    }
}
