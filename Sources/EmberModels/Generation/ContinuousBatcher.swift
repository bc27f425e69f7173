import EmberCore
import Foundation

/// Continuous batching: generations of one model under the same execution options decode together, one token
/// each per step, as one forward pass (``TextGenerator/forwardBatch(_:sessions:options:)``) — one matrix product
/// per weight over every active sequence instead of one per sequence. A sequence joins after its own prompt pass
/// and leaves when it ends; the others never wait for it.
///
/// No thread of its own: the calling threads take turns. Each generation's thread blocks in
/// ``TextGenerator/generate(prompt:maxTokens:sampler:options:stop:batcher:batchKey:onPiece:onLogprobs:betweenTokens:)``;
/// one of them drives the steps for all, and hands the driving to another when its own sequence ends. One batcher
/// per runtime (a host may make more); batches are keyed by model and options.
public final class ContinuousBatcher: @unchecked Sendable {
    private let lock = NSLock()
    private var batches: [String: DecodeBatch] = [:]
    /// Most sequences in one step; more wait for a place.
    public let maxSequences: Int

    /// A batcher of at most `maxSequences` sequences per step (at least 1).
    public init(maxSequences: Int = 32) {
        self.maxSequences = max(1, maxSequences)
    }

    /// How many sequences each batch holds now, by key (for tests and reports).
    public var activeSequences: [String: Int] {
        lock.withLock { batches.mapValues(\.count) }
    }

    /// The most sequences one step has decoded so far, over every batch.
    public var largestStep: Int { lock.withLock { largest } }
    /// Batched steps run so far, and the sequence-tokens they decoded (their ratio is the mean batch size).
    public var steps: (count: Int, sequences: Int) { lock.withLock { (stepCount, sequenceCount) } }
    private var largest = 0
    private var stepCount = 0
    private var sequenceCount = 0

    func noteStep(_ size: Int) {
        lock.withLock {
            largest = max(largest, size)
            stepCount += 1
            sequenceCount += size
        }
    }

    func batch(for key: String, model: any TextGenerator, options: ExecutionOptions) -> DecodeBatch {
        lock.withLock {
            if let batch = batches[key] { return batch }
            let batch = DecodeBatch(key: key, model: model, options: options, batcher: self)
            batches[key] = batch
            return batch
        }
    }

    /// Forgets `batch` once it has no members, so a released model is not kept alive by its batch.
    func remove(_ batch: DecodeBatch) {
        lock.withLock {
            if batches[batch.key] === batch, batch.count == 0 { batches[batch.key] = nil }
        }
    }
}

/// One member of a batch: its state, its callbacks, and where its thread waits.
final class BatchSequence: @unchecked Sendable {
    var state: SequenceState
    /// A piece of text and the log-probabilities of the tokens it completes (see ``SequenceState/accept(logits:onPiece:)``).
    let onPiece: (String, [TokenLogprobs]) -> Void
    let betweenTokens: () throws -> Void
    /// Signalled when the sequence has ended or its thread must drive.
    let wake = DispatchSemaphore(value: 0)
    var outcome: Result<Generation, Error>?
    var mustDrive = false

    init(state: SequenceState, onPiece: @escaping (String, [TokenLogprobs]) -> Void, betweenTokens: @escaping () throws -> Void) {
        self.state = state
        self.onPiece = onPiece
        self.betweenTokens = betweenTokens
    }
}

/// The sequences of one model and one set of options that step together.
final class DecodeBatch: @unchecked Sendable {
    let key: String
    let model: any TextGenerator
    let options: ExecutionOptions
    unowned let batcher: ContinuousBatcher
    private let lock = NSLock()
    private var members: [BatchSequence] = []
    private var driving = false

    init(key: String, model: any TextGenerator, options: ExecutionOptions, batcher: ContinuousBatcher) {
        self.key = key
        self.model = model
        self.options = options
        self.batcher = batcher
    }

    var count: Int { lock.withLock { members.count } }

    /// Adds `sequence` and returns when it has ended (its thread driving the batch meanwhile when its turn comes).
    func run(_ sequence: BatchSequence) throws -> Generation {
        lock.withLock {
            members.append(sequence)
            if !driving {
                driving = true
                sequence.mustDrive = true
            }
        }
        while true {
            if lock.withLock({ sequence.mustDrive }) {
                drive(until: sequence)
            } else {
                sequence.wake.wait()
            }
            if let outcome = lock.withLock({ sequence.outcome }) { return try outcome.get() }
        }
    }

    /// Steps every member until `own` has ended, then hands the driving to another member (or stops).
    private func drive(until own: BatchSequence) {
        while lock.withLock({ own.outcome == nil }) {
            let active = lock.withLock { Array(members.prefix(batcher.maxSequences)) }
            step(active)
        }
        let idle: Bool = lock.withLock {
            own.mustDrive = false
            guard let next = members.first else {
                driving = false
                return true
            }
            next.mustDrive = true
            next.wake.signal()
            return false
        }
        if idle { batcher.remove(self) } // outside this batch's lock: the batcher's is always taken first
    }

    /// One token for each of `active`: their checkpoints (a member that throws ends with that error), one batched
    /// pass, then each samples and streams; members that ended leave and are woken.
    private func step(_ active: [BatchSequence]) {
        var ready: [BatchSequence] = []
        for member in active {
            do {
                try member.betweenTokens()
                ready.append(member)
            } catch {
                end(member, with: .failure(error))
            }
        }
        guard !ready.isEmpty else { return }
        batcher.noteStep(ready.count)
        do {
            let logits = try model.forwardBatch(ready.map(\.state.lastToken), sessions: ready.map(\.state.session), options: options)
            let values = try logits.scalars()
            let width = model.vocabularySize
            // Sampling reads a whole vocabulary per sequence: the members sample at once, each touching only its own state.
            let stepping = ready
            DispatchQueue.concurrentPerform(iterations: stepping.count) { row in
                let member = stepping[row]
                member.state.accept(logits: Array(values[(row * width)..<((row + 1) * width)]), onPiece: member.onPiece)
                if member.state.finished { end(member, with: .success(member.state.finish(onPiece: member.onPiece))) }
            }
        } catch {
            for member in ready { end(member, with: .failure(error)) }
        }
    }

    private func end(_ member: BatchSequence, with outcome: Result<Generation, Error>) {
        lock.withLock {
            member.outcome = outcome
            members.removeAll { $0 === member }
        }
        member.wake.signal()
    }
}

extension TextGenerator {
    /// ``generate(prompt:maxTokens:sampler:options:stop:onPiece:onLogprobs:betweenTokens:)`` with its decode steps shared: after
    /// its own prompt pass the sequence joins `batcher`'s batch for `batchKey` (callers give one key per model and
    /// options) and decodes one token per step with every other sequence there. The text is what the sequence
    /// would produce alone, up to the rounding of batched matrix products.
    public func generate(prompt: String, maxTokens: Int, sampler settings: SamplerSettings = SamplerSettings(),
                         options: ExecutionOptions = ExecutionOptions(), stop: [String] = [], batcher: ContinuousBatcher,
                         batchKey: String, onPiece: @escaping (String) -> Void = { _ in },
                         onLogprobs: @escaping ([TokenLogprobs]) -> Void = { _ in },
                         betweenTokens: @escaping () throws -> Void = {}) throws -> Generation {
        try generate(from: .text(prompt), maxTokens: maxTokens, sampler: settings, options: options, stop: stop, batcher: batcher,
                     batchKey: batchKey, onPiece: onPiece, onLogprobs: onLogprobs, betweenTokens: betweenTokens)
    }

    /// The batched generation from text or from token ids; a `promptCache` serves as in the unbatched one.
    public func generate(from input: PromptInput, maxTokens: Int, sampler settings: SamplerSettings = SamplerSettings(),
                         options: ExecutionOptions = ExecutionOptions(), stop: [String] = [], promptCache: PromptCache? = nil,
                         batcher: ContinuousBatcher, batchKey: String, onPiece: @escaping (String) -> Void = { _ in },
                         onLogprobs: @escaping ([TokenLogprobs]) -> Void = { _ in },
                         betweenTokens: @escaping () throws -> Void = {}) throws -> Generation {
        let (promptIDs, session) = try promptSession(input, maxTokens: maxTokens)
        guard maxTokens >= 0 else { throw KernelError.invalidArgument(argument: "maxTokens", found: "\(maxTokens)", expected: "≥ 0") }
        try settings.validate()
        var state = try SequenceState(tokenizer: tokenizer, session: session, promptTokens: promptIDs, history: promptIDs,
                                      maxTokens: maxTokens, sampler: Sampler(settings), stop: stop)
        let logits = try prefill(&state, promptCache: promptCache, options: options)
        let stream: (String, [TokenLogprobs]) -> Void = { piece, logprobs in
            if !logprobs.isEmpty { onLogprobs(logprobs) }
            onPiece(piece)
        }
        if !state.finished { state.accept(logits: try logits.scalars(), onPiece: stream) }
        let generation: Generation
        if state.finished {
            generation = state.finish(onPiece: stream)
        } else {
            let batch = batcher.batch(for: batchKey, model: self, options: options)
            generation = try batch.run(BatchSequence(state: state, onPiece: stream, betweenTokens: betweenTokens))
        }
        promptCache?.keep(session, after: generation, model: self, options: options)
        return generation
    }
}
