import Foundation

/// How a ``SecurityPolicy`` pins a server: not at all, by public key, or by certificate.
public enum SSLPinningMode: UInt, Sendable, CaseIterable {
    /// No pinning: the chain must be trusted (unless invalid certificates are allowed).
    case none = 0
    /// A certificate of the chain must carry one of the pinned public keys.
    case publicKey = 1
    /// The chain must verify against the pinned certificates as anchors and contain one of them.
    case certificate = 2
}

/// What Linux lacks: a server's certificate chain to evaluate, with the trust anchors and the time to evaluate at.
public struct ServerTrust: Sendable {
    /// The certificates the server presented, DER, leaf first.
    public let certificateChain: [Data]
    /// The anchors to trust instead of the system trust store, DER; nil means the system store.
    public let anchors: [Data]?
    /// The time the certificates must be valid at.
    public let verificationDate: Date

    /// Creates a trust to evaluate.
    ///
    /// - Parameters:
    ///   - certificateChain: DER certificates, leaf first.
    ///   - anchors: DER trust anchors; nil for the system trust store.
    ///   - verificationDate: When the certificates must be valid; now by default.
    public init(certificateChain: [Data], anchors: [Data]? = nil, verificationDate: Date = Date()) {
        self.certificateChain = certificateChain
        self.anchors = anchors
        self.verificationDate = verificationDate
    }
}
