import Foundation

/// Decides whether a server's certificate chain is trusted, with AFNetworking's rules and optional pinning.
///
/// ```swift
/// let pins: Set<String> = ["sha256/YLh1dUR9y6Kja30RrAn7JKnbQG/uEtLMkBgFF2Fuihg=",   // current key
///                          "sha256/Vjs8r4z+80wjNcr1YKepWQboSIRi63WsWXhIMN+eWys="]   // backup key
/// let policy = SecurityPolicy(pinnedPublicKeyHashes: pins)
/// let trust = ServerTrust(certificateChain: chainDER)
/// policy.evaluate(trust, forDomain: "api.example.com")
/// ```
///
/// Rules, as AFNetworking's `evaluateServerTrust:forDomain:`:
/// - with `allowInvalidCertificates`, `validatesDomainName` and no pins (or mode none), any domain is refused;
/// - with `validatesDomainName` the chain must match the domain; without it only the chain is checked;
/// - mode none: valid if the chain is trusted, or if invalid certificates are allowed;
/// - otherwise an untrusted chain fails unless invalid certificates are allowed;
/// - certificate mode: the pinned certificates are the anchors, the chain must verify against them, and one
///   certificate of the verified chain must equal a pinned one;
/// - public-key mode: any chain certificate whose public key is pinned passes; an empty pin set always fails.
///
/// "Trusted" means the chain verifies against the ``ServerTrust/anchors`` (the system store when nil) at the
/// trust's date, by OpenSSL. Enforcement in the TLS handshake of a live connection comes with SessionKit's own
/// transport; on the Foundation transport, URLSession on Linux never lets a policy see the server's chain.
open class SecurityPolicy: NSObject, NSSecureCoding, NSCopying, @unchecked Sendable {
    // @unchecked Sendable: the mutable fields are guarded by `settings`.
    private struct Settings {
        var pinnedCertificates: Set<Data>
        var pinnedPublicKeyHashes: Set<String>
        var allowInvalidCertificates = false
        var validatesDomainName = true
        /// The only anchors of ``SecurityPolicy/init(trustingRootCertificates:)``; nil: the trust's own anchors.
        var trustedRootCertificates: Set<Data>? = nil
        var reportsOnly = false
        /// ``SecurityPolicy/configurationKey`` once computed; every setter clears it.
        var key: String? = nil
    }

    /// How the policy pins.
    public let pinningMode: SSLPinningMode
    private let settings: Protected<Settings>

    /// A new policy with mode none and no pins: the chain must be trusted by the system store.
    public class var `default`: SecurityPolicy {
        SecurityPolicy(pinningMode: .none, pinnedCertificates: [])
    }

    /// A policy pinning the certificates found in the main bundle (`.cer`, `.crt`, `.der`, `.pem` files).
    public convenience init(pinningMode: SSLPinningMode) {
        self.init(pinningMode: pinningMode, pinnedCertificates: Self.certificates(in: .main))
    }

    /// A policy pinning `pinnedCertificates` (DER or PEM).
    public init(pinningMode: SSLPinningMode, pinnedCertificates: Set<Data>) {
        self.pinningMode = pinningMode
        self.settings = Protected(
            Settings(pinnedCertificates: Self.derCertificates(pinnedCertificates), pinnedPublicKeyHashes: []))
        super.init()
    }

    /// A policy that trusts `rootCertificates` (DER or PEM) as the only anchors, instead of the system trust store,
    /// and checks the domain name: what a private CA needs, as AsyncHTTPClient's `trustRoots: .certificates([ca])` or
    /// Alamofire's `DefaultTrustEvaluator` with custom anchors. The chain must lead to one of them and be valid now,
    /// and the server's certificate must name the host; no `allowInvalidCertificates` is needed. An empty set trusts
    /// nothing.
    ///
    /// ```swift
    /// let ca = try Data(contentsOf: URL(fileURLWithPath: "/etc/myapp/ca.pem"))
    /// manager.securityPolicy = SecurityPolicy(trustingRootCertificates: [ca])
    /// ```
    public init(trustingRootCertificates rootCertificates: Set<Data>) {
        self.pinningMode = .none
        self.settings = Protected(
            Settings(
                pinnedCertificates: [], pinnedPublicKeyHashes: [],
                trustedRootCertificates: Self.derCertificates(rootCertificates)))
        super.init()
    }

    /// The only trust anchors of a policy made with ``init(trustingRootCertificates:)`` (DER); nil for the other
    /// policies, which use the system trust store.
    public var trustedRootCertificates: Set<Data>? {
        settings.read { $0.trustedRootCertificates }
    }

    /// A public-key policy pinning SHA-256 hashes of SubjectPublicKeyInfo, written `sha256/<base64>` as HPKP, OkHttp
    /// and curl write them. Several pins allow backup keys and rotation.
    public init(pinnedPublicKeyHashes: Set<String>) {
        self.pinningMode = .publicKey
        self.settings = Protected(Settings(pinnedCertificates: [], pinnedPublicKeyHashes: pinnedPublicKeyHashes))
        super.init()
    }

    /// The pinned certificates, DER. PEM given here is converted; bytes that are neither are dropped.
    public var pinnedCertificates: Set<Data> {
        get { settings.read { $0.pinnedCertificates } }
        set { update { $0.pinnedCertificates = Self.derCertificates(newValue) } }
    }

    /// The pinned public-key hashes (`sha256/<base64>`).
    public var pinnedPublicKeyHashes: Set<String> {
        settings.read { $0.pinnedPublicKeyHashes }
    }

    /// Whether an untrusted chain (expired, self-signed, unknown root) may still pass. Default false.
    public var allowInvalidCertificates: Bool {
        get { settings.read { $0.allowInvalidCertificates } }
        set { update { $0.allowInvalidCertificates = newValue } }
    }

    /// Whether the leaf must match the domain. Default true.
    public var validatesDomainName: Bool {
        get { settings.read { $0.validatesDomainName } }
        set { update { $0.validatesDomainName = newValue } }
    }

    /// Whether a pin mismatch is only reported: the connection goes on, and the request's event monitors receive a
    /// ``PinningReport`` (``EventMonitor/request(_:didFailPinningFor:report:)``; ``LoggingEventMonitor`` logs it as a
    /// warning with the chain's public-key hashes). Default false: a mismatch refuses the connection.
    ///
    /// For rolling out pins: ship them report-only, watch the reports, then turn reporting off. It covers the pins
    /// only: a chain the policy validates (mode none, or `allowInvalidCertificates == false`) must still be trusted
    /// and valid for the host, and is refused otherwise. ``evaluate(_:forDomain:)`` answers as if it were off; the
    /// curl transport applies it in the handshake (the Foundation transport enforces no policy).
    ///
    /// ```swift
    /// let policy = SecurityPolicy(pinnedPublicKeyHashes: ["sha256/…new key…"])
    /// policy.reportsOnly = true
    /// manager.securityPolicy = policy
    /// manager.eventMonitors = [LoggingEventMonitor(logger: Logger(label: "pins"))]
    /// ```
    public var reportsOnly: Bool {
        get { settings.read { $0.reportsOnly } }
        set { update { $0.reportsOnly = newValue } }
    }

    /// The certificates in `bundle`'s resources: every `.cer`, `.crt`, `.der` and `.pem` file, as DER.
    public static func certificates(in bundle: Bundle) -> Set<Data> {
        guard let path = bundle.resourcePath,
            let names = try? FileManager.default.contentsOfDirectory(atPath: path)
        else { return [] }
        var result = Set<Data>()
        for name in names where ["cer", "crt", "der", "pem"].contains((name as NSString).pathExtension.lowercased()) {
            guard let data = FileManager.default.contents(atPath: (path as NSString).appendingPathComponent(name)),
                let certificates = try? Certificate.certificates(from: data)
            else { continue }
            certificates.forEach { result.insert($0.der) }
        }
        return result
    }

    // MARK: - Evaluation

    /// Whether `serverTrust` passes this policy for `domain` (nil: no domain to match).
    public func evaluate(_ serverTrust: ServerTrust, forDomain domain: String?) -> Bool {
        decide(serverTrust, forDomain: domain) == nil
    }

    /// Why a chain was refused: the `URLError` code a transport reports, and a sentence for the user.
    struct Refusal: Equatable {
        let code: URLError.Code
        let reason: String

        /// A refusal for OpenSSL's verification `outcome`: expired, not yet valid and unknown roots get codes of their
        /// own; a host mismatch and anything else are `.serverCertificateUntrusted` with OpenSSL's reason.
        init(_ outcome: ChainVerifier.Outcome, domain: String?) {
            switch outcome.code {
            case 10:  // X509_V_ERR_CERT_HAS_EXPIRED
                code = .serverCertificateHasBadDate
                reason = "A certificate of the server's chain has expired."
            case 9:  // X509_V_ERR_CERT_NOT_YET_VALID
                code = .serverCertificateNotYetValid
                reason = "A certificate of the server's chain is not yet valid."
            // No issuer, self-signed leaf or root, no local issuer, leaf signature unverifiable.
            case 2, 18, 19, 20, 21:
                code = .serverCertificateHasUnknownRoot
                reason = "The server's certificate chain does not end at a trusted root (\(outcome.reason))."
            case 62, 64:  // X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
                code = .serverCertificateUntrusted
                reason = "The server's certificate is not valid for \(domain ?? "this host")."
            default:
                code = .serverCertificateUntrusted
                reason = "The server's certificate chain is not valid (\(outcome.reason))."
            }
        }

        /// Whether the chain failed only because it matched no pin (what ``SecurityPolicy/reportsOnly`` lets through).
        var isPinMismatch = false

        init(code: URLError.Code = .serverCertificateUntrusted, reason: String, isPinMismatch: Bool = false) {
            self.code = code
            self.reason = reason
            self.isPinMismatch = isPinMismatch
        }

        /// The `userInfo` text of the transport's error for `host`: AFNetworking's description (CFNetwork's
        /// `Err-1202.w` sentence) and this refusal's precise ``reason`` as the failure reason.
        func userInfo(forHost host: String?) -> [String: Any] {
            let description =
                "The certificate for this server is invalid. You might be connecting to a server that "
                + "is pretending to be \u{201C}\(host ?? "")\u{201D} which could put your confidential information at risk."
            return [NSLocalizedDescriptionKey: description, NSLocalizedFailureReasonErrorKey: reason]
        }
    }

    /// Evaluates `serverTrust` with AFNetworking's rules: nil when it passes, else why not.
    func decide(_ serverTrust: ServerTrust, forDomain domain: String?) -> Refusal? {
        let settings = self.settings.wrappedValue
        let certificatePins = settings.pinnedCertificates
        // Key pins only matter in public-key mode: parsing every pinned certificate at every handshake for nothing
        // cost more than the rest of the decision (OpenSSL 3 parses slowly).
        let keyPins =
            pinningMode == .publicKey
            ? settings.pinnedPublicKeyHashes.union(certificatePins.compactMap { Self.publicKeyPin(of: $0) })
            : settings.pinnedPublicKeyHashes
        let hasPins = pinningMode == .certificate ? !certificatePins.isEmpty : !keyPins.isEmpty

        if domain != nil, settings.allowInvalidCertificates, settings.validatesDomainName,
            pinningMode == .none || !hasPins
        {
            // AFNetworking: a domain can only be checked against pins when the chain is not validated.
            return Refusal(
                reason: "The policy allows invalid certificates and validates the domain name without pins: "
                    + "no server can pass it.")
        }
        let checkedDomain = settings.validatesDomainName ? domain : nil
        let chain = serverTrust.certificateChain
        let anchors = settings.trustedRootCertificates.map { Array($0) } ?? serverTrust.anchors
        if let roots = settings.trustedRootCertificates, roots.isEmpty {
            return Refusal(
                code: .serverCertificateHasUnknownRoot,
                reason:
                    "The policy trusts no root certificate: give SecurityPolicy(trustingRootCertificates:) the CA that issued the server's certificate."
            )
        }
        // Verified against the system store (or the given anchors) only when the answer matters: a policy that
        // allows invalid certificates and pins certificates never looks at it, and a verification checks every
        // signature of the chain again.
        lazy var systemOutcome = ChainVerifier.verify(
            chain: chain, anchors: anchors, domain: checkedDomain, date: serverTrust.verificationDate)

        if pinningMode == .none {
            return settings.allowInvalidCertificates || systemOutcome.isTrusted
                ? nil : Refusal(systemOutcome, domain: checkedDomain)
        }
        if !settings.allowInvalidCertificates && !systemOutcome.isTrusted {
            var refusal = Refusal(systemOutcome, domain: checkedDomain)
            if systemOutcome.code != 62 && systemOutcome.code != 64 {
                // AFNetworking's rule: pinning does not replace chain validation. Say how to fix the policy.
                refusal = Refusal(
                    code: refusal.code,
                    reason: refusal.reason
                        + " Pinning checks the chain against the system trust store first: for a private CA, use "
                        + "SecurityPolicy(trustingRootCertificates: [ca]); to rely on the pins alone, set "
                        + "allowInvalidCertificates = true.")
            }
            return refusal
        }
        let noPin = Refusal(
            reason: "No certificate of the server's chain matches a pinned "
                + (pinningMode == .certificate ? "certificate." : "public key."),
            isPinMismatch: true)
        switch pinningMode {
        case .none:
            return noPin
        case .certificate:
            guard hasPins else { return noPin }
            // With invalid certificates allowed, a pinned certificate is trusted as it is, however weakly it is signed
            // or keyed (a device's own self-signed certificate); otherwise the chain passed the strength check above.
            let strength = !settings.allowInvalidCertificates
            let pinnedOutcome = ChainVerifier.verify(
                chain: chain, anchors: Array(certificatePins), domain: checkedDomain,
                date: serverTrust.verificationDate, checksStrength: strength)
            guard pinnedOutcome.isTrusted else {
                // A chain that leads to no pinned certificate, whatever the dates, is a pin failure; one that does
                // but fails at this date or for this host says why.
                let leadsToPin = ChainVerifier.verify(
                    chain: chain, anchors: Array(certificatePins), domain: nil,
                    date: serverTrust.verificationDate, checksTime: false, checksStrength: false
                ).isTrusted
                return leadsToPin ? Refusal(pinnedOutcome, domain: checkedDomain) : noPin
            }
            return pinnedOutcome.builtChain.contains { certificatePins.contains($0) } ? nil : noPin
        case .publicKey:
            guard hasPins else { return noPin }
            // As the chain of a SecTrust: the presented certificates up to the anchor, when a chain can be built
            // (whatever the domain), else as presented.
            var candidates = systemOutcome.isTrusted ? systemOutcome.builtChain : chain
            if !systemOutcome.isTrusted {
                let built = ChainVerifier.verify(
                    chain: chain, anchors: anchors, domain: nil,
                    date: serverTrust.verificationDate)
                if built.isTrusted { candidates = built.builtChain }
            }
            let pinned = candidates.contains { der in
                guard let pin = Self.publicKeyPin(of: der) else { return false }
                return keyPins.contains(pin)
            }
            guard pinned else { return noPin }
            // With invalid certificates allowed the chain was not checked, so nor was the name: a key pinned on an
            // intermediate would pass any certificate it issued, for any host (AFNetworking's public-key mode does
            // so; `validatesDomainName` says otherwise).
            if settings.allowInvalidCertificates, let checkedDomain {
                let named = ChainVerifier.leaf(of: chain, matches: checkedDomain)
                if !named.isTrusted { return Refusal(named, domain: checkedDomain) }
            }
            return nil
        }
    }

    /// The `sha256/…` pin of the public key of the certificate `der`, remembered for the certificates seen lately
    /// (the same chains come back at every handshake); nil for bytes that are not a certificate.
    static func publicKeyPin(of der: Data) -> String? {
        if let pin = publicKeyPins.read({ $0[der] }) { return pin }
        guard let pin = try? Certificate(der: der).publicKeyPin else { return nil }
        publicKeyPins.write { pins in
            if pins.count >= 64 { pins.removeAll() }
            pins[der] = pin
        }
        return pin
    }

    private static let publicKeyPins = Protected<[Data: String]>([:])

    /// A text equal for two policies exactly when they decide alike: mode, flags and pins.
    /// Changes the settings; the configuration key is computed again on its next use.
    private func update(_ change: (inout Settings) -> Void) {
        settings.write {
            change(&$0)
            $0.key = nil
        }
    }

    /// Computed once per change of the policy (the engines and the HTTP cache ask for it at every request).
    var configurationKey: String {
        settings.write { settings in
            if let key = settings.key { return key }
            let key = Self.configurationKey(of: settings, mode: pinningMode)
            settings.key = key
            return key
        }
    }

    private static func configurationKey(of settings: Settings, mode pinningMode: SSLPinningMode) -> String {
        let certificates = settings.pinnedCertificates.map { Certificate.sha256($0).base64EncodedString() }.sorted()
        let roots = settings.trustedRootCertificates.map {
            "roots:" + $0.map { Certificate.sha256($0).base64EncodedString() }.sorted().joined(separator: ",")
        }
        return [
            "\(pinningMode.rawValue)", "\(settings.allowInvalidCertificates)", "\(settings.validatesDomainName)",
            settings.pinnedPublicKeyHashes.sorted().joined(separator: ","), certificates.joined(separator: ","),
            roots ?? "system", settings.reportsOnly ? "reportsOnly" : "enforced",
        ]
        .joined(separator: "|")
    }

    // MARK: - NSSecureCoding and NSCopying

    /// Archives use secure coding.
    public class var supportsSecureCoding: Bool { true }

    /// Restores a policy from an archive: mode, pins, the flags and ``reportsOnly`` (false in archives made before it).
    public required init?(coder: NSCoder) {
        guard coder.decodeArchiveVersion(),
            let mode = coder.number("pinningMode").flatMap({ SSLPinningMode(rawValue: $0.uintValue) }),
            let certificates = coder.object("pinnedCertificates") as? [Any],
            let hashes = coder.strings("pinnedPublicKeyHashes"),
            let allowInvalid = coder.number("allowInvalidCertificates")?.boolValue,
            let validatesDomain = coder.number("validatesDomainName")?.boolValue
        else { return nil }
        // Archives made before `reportsOnly` existed have no such key: they enforce their pins.
        var reportsOnly = false
        if coder.containsValue(forKey: "reportsOnly") {
            guard let flag = coder.number("reportsOnly")?.boolValue else { return nil }
            reportsOnly = flag
        }
        var pinned = Set<Data>()
        for certificate in certificates {
            guard let der = certificate as? Data else { return nil }
            pinned.insert(der)
        }
        var roots: Set<Data>?
        if coder.containsValue(forKey: "trustedRootCertificates") {
            guard let archived = coder.object("trustedRootCertificates") as? [Any] else { return nil }
            var decoded = Set<Data>()
            for certificate in archived {
                guard let der = certificate as? Data else { return nil }
                decoded.insert(der)
            }
            roots = decoded
        }
        self.pinningMode = mode
        self.settings = Protected(
            Settings(
                pinnedCertificates: pinned, pinnedPublicKeyHashes: Set(hashes),
                allowInvalidCertificates: allowInvalid, validatesDomainName: validatesDomain,
                trustedRootCertificates: roots, reportsOnly: reportsOnly))
        super.init()
    }

    /// Archives the mode, the pins, the flags and ``reportsOnly``.
    open func encode(with coder: NSCoder) {
        coder.encodeArchiveVersion()
        let settings = self.settings.wrappedValue
        coder.encode(NSNumber(value: pinningMode.rawValue), forKey: "pinningMode")
        coder.encode(
            settings.pinnedCertificates.sorted { $0.lexicographicallyPrecedes($1) } as NSArray,
            forKey: "pinnedCertificates")
        coder.encode(settings.pinnedPublicKeyHashes.sorted() as NSArray, forKey: "pinnedPublicKeyHashes")
        coder.encode(NSNumber(value: settings.allowInvalidCertificates), forKey: "allowInvalidCertificates")
        coder.encode(NSNumber(value: settings.validatesDomainName), forKey: "validatesDomainName")
        coder.encode(NSNumber(value: settings.reportsOnly), forKey: "reportsOnly")
        if let roots = settings.trustedRootCertificates {
            coder.encode(
                roots.sorted { $0.lexicographicallyPrecedes($1) } as NSArray, forKey: "trustedRootCertificates")
        }
    }

    /// An independent policy with the same mode, pins and flags.
    open func copy(with zone: NSZone? = nil) -> Any {
        let copy = SecurityPolicy(pinningMode: pinningMode, pinnedCertificates: [])
        copy.settings.wrappedValue = settings.wrappedValue
        return copy
    }

    /// `certificates` with PEM converted to DER and bytes that are no certificate dropped.
    private static func derCertificates(_ certificates: Set<Data>) -> Set<Data> {
        Set(certificates.flatMap { data in (try? Certificate.certificates(from: data))?.map(\.der) ?? [] })
    }
}
