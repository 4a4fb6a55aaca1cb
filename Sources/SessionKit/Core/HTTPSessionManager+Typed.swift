import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension HTTPSessionManager {
    // MARK: - Typed bodies and results (async forms)

    /// Sends `body` encoded as JSON and decodes the JSON response into `T`: nothing passes through `Any`, so the
    /// call is as `Sendable` as `Body` and `T` are. The manager's request serializer adds its headers (its parameter
    /// encoding is not used; `Content-Type` is `application/json` unless `headers` set one); statuses outside
    /// 200–299 fail first, as in `get(_:as:)`.
    ///
    /// ```swift
    /// struct NewUser: Encodable, Sendable { let name: String }
    /// struct User: Decodable, Sendable { let id: Int; let name: String }
    /// let user = try await manager.request("POST", "users", body: NewUser(name: "Ada"), as: User.self)
    /// ```
    /// - Throws: A header that is not valid, the encoding error, the transport or validation error, or a decoding
    ///   error naming the key path (`SessionKitError(error).kind == .decodingFailed`).
    public func request<Body: Encodable, T: Decodable>(
        _ method: String,
        _ urlString: String,
        body: Body,
        headers: [String: String]? = nil,
        as type: T.Type,
        encoder: JSONEncoder = JSONEncoder(),
        decoder: JSONDecoder = JSONDecoder()
    ) async throws -> T {
        var request = try buildRequest(method: method, urlString: urlString, parameters: nil, headers: headers)
        request.httpBody = try encoder.encode(body)
        // JSON, unless this call's headers say otherwise (the serializer's form type does not apply to this body).
        if headers?.keys.contains(where: { $0.lowercased() == "content-type" }) != true {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let result = try await perform(request, responseSerializer: DecodableResponseSerializer(type, decoder: decoder))
        guard let value = result.object as? T else {
            throw SessionKitError.responseSerialization(
                .cannotDecodeContentData, "The response carried no \(T.self).", response: result.response,
                data: result.data)
        }
        return value
    }

    /// Sends a `POST` whose body is `body` encoded as JSON and decodes the JSON response into `T`.
    public func post<Body: Encodable, T: Decodable>(
        _ urlString: String,
        body: Body,
        headers: [String: String]? = nil,
        as type: T.Type,
        encoder: JSONEncoder = JSONEncoder(),
        decoder: JSONDecoder = JSONDecoder()
    ) async throws -> T {
        try await request("POST", urlString, body: body, headers: headers, as: type, encoder: encoder, decoder: decoder)
    }
}
