import Foundation

/// A pin mismatch that a ``SecurityPolicy`` with ``SecurityPolicy/reportsOnly`` let through: the server's chain
/// matched none of the pins, and the request went on. Event monitors receive it
/// (``EventMonitor/request(_:didFailPinningFor:report:)``), and ``LoggingEventMonitor`` logs it as a warning.
///
/// ```swift
/// final class PinReporter: EventMonitor {
///     let queue = DispatchQueue(label: "pins")
///     func request(_ request: SessionRequest, didFailPinningFor host: String, report: PinningReport) {
///         print("\(host) presented", report.publicKeyHashes)   // ["sha256/…", …], leaf first
///     }
/// }
/// ```
public struct PinningReport: Sendable, Equatable {
    /// The host the connection was made to.
    public let host: String
    /// The SHA-256 hash of the SubjectPublicKeyInfo of each certificate the server presented, leaf first, written
    /// `sha256/<base64>` as ``SecurityPolicy/pinnedPublicKeyHashes`` are: the pins that would have matched.
    public let publicKeyHashes: [String]
    /// The certificates the server presented, DER, leaf first.
    public let certificateChain: [Data]
    /// Why the chain failed the policy's pins.
    public let reason: String

    /// A report of `chain` failing the pins of a connection to `host`.
    init(host: String, certificateChain: [Data], reason: String) {
        self.host = host
        self.certificateChain = certificateChain
        self.publicKeyHashes = certificateChain.compactMap { SecurityPolicy.publicKeyPin(of: $0) }
        self.reason = reason
    }
}
