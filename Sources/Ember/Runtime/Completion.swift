import EmberCore
import EmberModels
import Foundation

/// A finished request as a host sees it: what it produced, the decision the
/// power policy made for it, how long it waited and ran, and the energy it
/// reported (measured where the machine can measure, modelled otherwise).
public struct Completion<Output: Sendable>: Sendable {
    /// What the model produced: a ``Generation`` for text, one vector per text for embeddings.
    public var output: Output
    /// The precision, compute units, QoS and threads the request ran with.
    public var decision: Decision
    /// Seconds from submission to the start of the run (deferral included).
    public var waitSeconds: Double
    /// Seconds the run took.
    public var runSeconds: Double
    /// Tokens emitted per second of run time, for text generation.
    public var piecesPerSecond: Double?
    /// The energy the run reported, labelled measured or modelled.
    public var energy: EnergyEstimate?
    /// Whether this request joined an identical one instead of running itself.
    public var coalesced: Bool
    /// How many requests ran in the same batch (1 when alone).
    public var batchSize: Int

    /// The seconds the cost model expected for the work done (nil in a batch or for stored weights): against
    /// ``runSeconds``, the prediction's error.
    public var predictedSeconds: Double?

    init(_ result: InferenceResult, output: Output) {
        self.output = output
        decision = result.decision
        waitSeconds = result.waitSeconds
        runSeconds = result.runSeconds
        piecesPerSecond = result.piecesPerSecond
        energy = result.energy
        coalesced = result.coalesced
        batchSize = result.batchSize
        predictedSeconds = result.predictedSeconds
    }
}
