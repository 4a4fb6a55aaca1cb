import Foundation
import SessionKit
import SessionKitTestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Objects of every archivable class with a non-default value in every field, the committed archives of them
/// (`Fixtures/archives/v1/`), and the checks that a decoded object has those values.
enum ArchiveFixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/archives")

    static func configuredRequestSerializer<T: HTTPRequestSerializer>(_ type: T.Type) -> T {
        let serializer = T()
        serializer.setValue("fixture", forHTTPHeaderField: "X-Fixture")
        serializer.setValue("second", forHTTPHeaderField: "X-Second")
        serializer.stringEncoding = .isoLatin1
        serializer.timeoutInterval = 12
        serializer.cachePolicy = .reloadIgnoringLocalCacheData
        serializer.httpShouldHandleCookies = false
        serializer.allowsCellularAccess = false
        serializer.httpShouldUsePipelining = true
        serializer.httpMethodsEncodingParametersInURI = ["GET", "HEAD"]
        serializer.setQueryStringSerialization { _, _ in "closures are not archived" }
        (serializer as? JSONRequestSerializer)?.writingOptions = [.sortedKeys, .prettyPrinted]
        if let plist = serializer as? PropertyListRequestSerializer { plist.format = .binary }
        return serializer
    }

    static func configuredResponseSerializer<T: HTTPResponseSerializer>(_ type: T.Type) -> T {
        let serializer = T()
        serializer.acceptableStatusCodes = IndexSet(200..<300).union(IndexSet([304, 418]))
        serializer.acceptableContentTypes = ["application/fixture", "text/fixture"]
        if let json = serializer as? JSONResponseSerializer {
            json.readingOptions = [.fragmentsAllowed]
            json.removesKeysWithNullValues = true
        }
        if let plist = serializer as? PropertyListResponseSerializer { plist.format = .binary }
        return serializer
    }

    static func configuredCompound() -> CompoundResponseSerializer {
        let compound = CompoundResponseSerializer(responseSerializers: [
            configuredResponseSerializer(JSONResponseSerializer.self), XMLParserResponseSerializer(),
            configuredResponseSerializer(PropertyListResponseSerializer.self),
        ])
        compound.acceptableStatusCodes = IndexSet([200, 201])
        return compound
    }

    static func configuredConfiguration() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.default
        configuration.timeoutIntervalForRequest = 17
        configuration.timeoutIntervalForResource = 170
        configuration.httpAdditionalHeaders = ["X-Config": "from-configuration"]
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpMaximumConnectionsPerHost = 3
        configuration.httpShouldUsePipelining = true
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.allowsCellularAccess = false
        return configuration
    }

    static func configuredManager() -> HTTPSessionManager {
        let manager = HTTPSessionManager(
            baseURL: URL(string: "http://127.0.0.1:8080/v1"), sessionConfiguration: configuredConfiguration())
        manager.requestSerializer = configuredRequestSerializer(JSONRequestSerializer.self)
        manager.responseSerializer = configuredCompound()
        return manager
    }

    static func configuredPlainManager() -> URLSessionManager {
        let manager = URLSessionManager(sessionConfiguration: configuredConfiguration())
        manager.responseSerializer = configuredResponseSerializer(JSONResponseSerializer.self)
        manager.transport = .foundation  // not the default (curl): the archive must carry it
        return manager
    }

    /// One fixture: file name, object, how to decode it as its own class, and the check of a decoded copy.
    struct Fixture {
        let name: String
        let object: NSObject & NSSecureCoding
        let decode: (Data) throws -> Any
        let check: (Any) -> [String]
    }

    private static func entry<T: NSObject & NSSecureCoding>(
        _ name: String, _ object: T, _ check: @escaping (Any) -> [String]
    ) -> Fixture {
        Fixture(name: name, object: object, decode: { try SecureArchive.unarchive(T.self, from: $0) }, check: check)
    }

    /// Every fixture.
    static var all: [Fixture] {
        [
            entry(
                "HTTPRequestSerializer", configuredRequestSerializer(HTTPRequestSerializer.self),
                { checkRequest($0, HTTPRequestSerializer.self) }),
            entry(
                "JSONRequestSerializer", configuredRequestSerializer(JSONRequestSerializer.self),
                { checkRequest($0, JSONRequestSerializer.self) }),
            entry(
                "PropertyListRequestSerializer", configuredRequestSerializer(PropertyListRequestSerializer.self),
                { checkRequest($0, PropertyListRequestSerializer.self) }),
            entry(
                "HTTPResponseSerializer", configuredResponseSerializer(HTTPResponseSerializer.self),
                { checkResponse($0, HTTPResponseSerializer.self) }),
            entry(
                "JSONResponseSerializer", configuredResponseSerializer(JSONResponseSerializer.self),
                { checkResponse($0, JSONResponseSerializer.self) }),
            entry(
                "XMLParserResponseSerializer", configuredResponseSerializer(XMLParserResponseSerializer.self),
                { checkResponse($0, XMLParserResponseSerializer.self) }),
            entry(
                "PropertyListResponseSerializer", configuredResponseSerializer(PropertyListResponseSerializer.self),
                { checkResponse($0, PropertyListResponseSerializer.self) }),
            entry("CompoundResponseSerializer", configuredCompound(), { checkCompound($0) }),
            entry("URLSessionManager", configuredPlainManager(), { checkPlainManager($0) }),
            entry("HTTPSessionManager", configuredManager(), { checkManager($0) }),
            entry("SecurityPolicy", configuredPolicy(), { checkPolicy($0) }),
        ]
    }

    static func configuredPolicy() -> SecurityPolicy {
        let certificates =
            (try? Data(contentsOf: TestCertificates.rootCAFile)).flatMap { try? Certificate.certificates(from: $0) }
            ?? []
        let policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: Set(certificates.map(\.der)))
        policy.allowInvalidCertificates = true
        policy.validatesDomainName = false
        return policy
    }

    static func checkPolicy(_ object: Any) -> [String] {
        guard let policy = object as? SecurityPolicy else { return ["not a SecurityPolicy"] }
        var problems: [String] = []
        if policy.pinningMode != .certificate { problems.append("pinningMode") }
        if policy.pinnedCertificates.count != 1 { problems.append("pinnedCertificates") }
        if !policy.allowInvalidCertificates { problems.append("allowInvalidCertificates") }
        if policy.validatesDomainName { problems.append("validatesDomainName") }
        return problems
    }

    // MARK: - Checks (each returns what differs)

    static func checkRequest<T: HTTPRequestSerializer>(_ object: Any, _ type: T.Type) -> [String] {
        guard let s = object as? T, Swift.type(of: s) == T.self else { return ["not a \(T.self): \(object)"] }
        var problems: [String] = []
        func expect(_ condition: Bool, _ what: String) { if !condition { problems.append(what) } }
        expect(s.value(forHTTPHeaderField: "X-Fixture") == "fixture", "header X-Fixture")
        expect(s.value(forHTTPHeaderField: "X-Second") == "second", "header X-Second")
        expect(s.stringEncoding == .isoLatin1, "stringEncoding")
        expect(s.timeoutInterval == 12, "timeoutInterval")
        expect(s.cachePolicy == .reloadIgnoringLocalCacheData, "cachePolicy")
        expect(!s.httpShouldHandleCookies, "httpShouldHandleCookies")
        expect(!s.allowsCellularAccess, "allowsCellularAccess")
        expect(s.httpShouldUsePipelining, "httpShouldUsePipelining")
        expect(s.httpMethodsEncodingParametersInURI == ["GET", "HEAD"], "httpMethodsEncodingParametersInURI")
        if let json = s as? JSONRequestSerializer {
            expect(json.writingOptions == [.sortedKeys, .prettyPrinted], "writingOptions")
        }
        if let plist = s as? PropertyListRequestSerializer { expect(plist.format == .binary, "format") }
        let request = try? s.request(withMethod: "GET", urlString: "http://h/p", parameters: ["a": "b"])
        expect(request?.url?.query == "a=b", "the query-string closure must not survive archiving")
        return problems
    }

    static func checkResponse<T: HTTPResponseSerializer>(_ object: Any, _ type: T.Type) -> [String] {
        guard let s = object as? T, Swift.type(of: s) == T.self else { return ["not a \(T.self): \(object)"] }
        var problems: [String] = []
        func expect(_ condition: Bool, _ what: String) { if !condition { problems.append(what) } }
        expect(s.acceptableStatusCodes == IndexSet(200..<300).union(IndexSet([304, 418])), "acceptableStatusCodes")
        expect(s.acceptableContentTypes == ["application/fixture", "text/fixture"], "acceptableContentTypes")
        if let json = s as? JSONResponseSerializer {
            expect(json.readingOptions == [.fragmentsAllowed], "readingOptions")
            expect(json.removesKeysWithNullValues, "removesKeysWithNullValues")
        }
        if let plist = s as? PropertyListResponseSerializer { expect(plist.format == .binary, "format") }
        return problems
    }

    static func checkCompound(_ object: Any) -> [String] {
        guard let compound = object as? CompoundResponseSerializer else { return ["not a compound"] }
        guard compound.responseSerializers.count == 3 else { return ["component count"] }
        return checkResponse(compound.responseSerializers[0], JSONResponseSerializer.self)
            + (compound.responseSerializers[1] is XMLParserResponseSerializer ? [] : ["component order"])
            + checkResponse(compound.responseSerializers[2], PropertyListResponseSerializer.self)
            + (compound.acceptableStatusCodes == IndexSet([200, 201]) ? [] : ["compound status codes"])
    }

    static func checkConfiguration(_ configuration: URLSessionConfiguration) -> [String] {
        var problems: [String] = []
        func expect(_ condition: Bool, _ what: String) { if !condition { problems.append(what) } }
        expect(configuration.timeoutIntervalForRequest == 17, "timeoutIntervalForRequest")
        expect(configuration.timeoutIntervalForResource == 170, "timeoutIntervalForResource")
        expect(
            configuration.httpAdditionalHeaders?["X-Config"] as? String == "from-configuration", "httpAdditionalHeaders"
        )
        expect(configuration.requestCachePolicy == .reloadIgnoringLocalCacheData, "requestCachePolicy")
        expect(configuration.httpMaximumConnectionsPerHost == 3, "httpMaximumConnectionsPerHost")
        expect(configuration.httpShouldUsePipelining, "httpShouldUsePipelining")
        expect(!configuration.httpShouldSetCookies, "httpShouldSetCookies")
        expect(configuration.httpCookieAcceptPolicy == .never, "httpCookieAcceptPolicy")
        expect(!configuration.allowsCellularAccess, "allowsCellularAccess")
        return problems
    }

    static func checkPlainManager(_ object: Any) -> [String] {
        guard let manager = object as? URLSessionManager, type(of: manager) == URLSessionManager.self else {
            return ["not a URLSessionManager"]
        }
        return checkConfiguration(manager.sessionConfiguration)
            + checkResponse(manager.responseSerializer, JSONResponseSerializer.self)
            + (manager.transport == .foundation ? [] : ["transport"])
    }

    static func checkManager(_ object: Any) -> [String] {
        guard let manager = object as? HTTPSessionManager else { return ["not an HTTPSessionManager"] }
        return checkConfiguration(manager.sessionConfiguration) + checkCompound(manager.responseSerializer)
            + checkRequest(manager.requestSerializer, JSONRequestSerializer.self)
            + (manager.baseURL?.absoluteString == "http://127.0.0.1:8080/v1/" ? [] : ["baseURL"])
    }
}
