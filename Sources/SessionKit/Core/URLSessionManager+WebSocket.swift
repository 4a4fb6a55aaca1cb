import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// MARK: - WebSocket tasks

extension URLSessionManager {
    /// Creates a WebSocket task to `url` (`ws://` or `wss://`), not resumed.
    ///
    /// - Parameters:
    ///   - url: The endpoint; `http` and `https` are taken as `ws` and `wss`.
    ///   - protocols: The subprotocols to offer (`Sec-WebSocket-Protocol`), in order of preference.
    public func webSocketTask(with url: URL, protocols: [String] = []) -> SessionWebSocketTask {
        var request = URLRequest(url: url)
        if !protocols.isEmpty {
            request.setValue(protocols.joined(separator: ", "), forHTTPHeaderField: "Sec-WebSocket-Protocol")
        }
        return webSocketTask(with: request)
    }

    /// Creates a WebSocket task for `request`, not resumed.
    ///
    /// The upgrade request carries the request's header fields (its `Sec-WebSocket-Protocol` lists the subprotocols
    /// offered), the configuration's additional headers, the cookie storage's cookies for the URL and, when the URL
    /// has a user and password and the request no `Authorization`, Basic credentials. The task runs on libcurl
    /// whatever ``transport`` is; `wss` is checked by the ``securityPolicy`` and the TLS versions set when the task
    /// is created. It is listed in ``tasks`` until it completes (through ``taskDidComplete``), and cancelled by
    /// ``invalidateSessionCancelingTasks(_:resetSession:)``. Made after the session was invalidated without a reset,
    /// or with a URL that is not `ws`, `wss`, `http` or `https` with a host, or with a header field that cannot go on
    /// the wire, it is not listed, and `resume()` and every operation fail with the reason.
    ///
    /// The manager's ``interceptor`` adapts the upgrade request when the task is resumed, before anything connects
    /// (an ``AuthenticationInterceptor`` adds its credential): it may change the request's fields, not its endpoint.
    /// An adapter's error ends the task with that error; the upgrade is not retried. Sends, receives and pings made
    /// meanwhile wait for the connection.
    ///
    /// ```swift
    /// var request = URLRequest(url: URL(string: "ws://127.0.0.1:8080/echo")!)
    /// request.setValue("Bearer token", forHTTPHeaderField: "Authorization")
    /// let task = manager.webSocketTask(with: request)
    /// task.resume()
    /// task.send(.string("hi")) { error in print(error ?? "sent") }
    /// task.receive { result in print(result) }
    /// ```
    ///
    /// - Parameter request: The upgrade request (its method and body are not used).
    public func webSocketTask(with request: URLRequest) -> SessionWebSocketTask {
        // A span for the connection, from the handshake to the close; its trace context goes with the handshake.
        var request = request
        let telemetry = self.telemetry.read { $0.active }.flatMap {
            $0.beginConnection(&request, delegateQueue: delegateDispatchQueue)
        }
        // The event monitors see the connection as one request: created, its task created, resumed, completed.
        let monitors = eventMonitors
        let observation = monitors.isEmpty ? nil : TaskDelegate.Observation.outsidePipeline(request, monitors: monitors)
        let configuration = sessionConfiguration
        let endpoint = request.url.flatMap(WebSocketHandshake.endpoint(of:))
        let extras = Self.managerFields(for: request, configuration)
        let handshake = WebSocketHandshake(
            url: request.url ?? URL(fileURLWithPath: "/"), key: WebSocketHandshake.makeKey(),
            protocols: Self.offeredProtocols(in: request), fields: Self.upgradeFields(of: request, extras: extras))
        // The manager's interceptor as it is when the task is resumed adapts the upgrade request (it is not retried).
        let adaptation: @Sendable () -> (@Sendable () async throws -> WebSocketHandshake)? = {
            [weak self, request] in
            guard let interceptor = self?.combinedInterceptor(nil) else { return nil }
            return {
                let adapted = try await interceptor.adapt(request, for: SessionRequest(request))
                return try Self.adaptedHandshake(adapted, endpoint: endpoint, extras: extras)
            }
        }
        let options = TransportTaskOptions(
            policy: securityPolicy,
            tlsVersions: TLSVersionRange(
                minimum: tlsMinimumSupportedProtocolVersion, maximum: tlsMaximumSupportedProtocolVersion),
            connection: connectionOptions, clientIdentity: clientIdentity)
        let invalidURL =
            endpoint == nil
            ? SessionKitError.session(
                .invalidRequestField,
                "\(request.url?.absoluteString ?? "nil") is not a ws, wss, http or https URL with a host.")
            : nil
        // Under the session lock, as stream tasks are made: one made while the session is being invalidated is either
        // refused or registered before the invalidation's cancel loop runs.
        return makeStreamTask { session, refusal in
            let sink = eventSink
            let refusal = refusal ?? invalidURL ?? handshake.fieldError
            let stream = taskTransports.makeStreamTask(
                host: endpoint?.host ?? "invalid", port: endpoint?.port ?? 0, options: options, session: session,
                sink: WebSocketStreamSink(), refusal: refusal)
            let driver = WebSocketDriver(
                request: request, handshake: handshake, secure: endpoint?.secure ?? false, stream: stream,
                timeout: configuration.timeoutIntervalForRequest,
                environment: .init(
                    sink: sink, session: session, delegateQueue: delegateDispatchQueue,
                    cookies: CookieJar(configuration),
                    refusal: refusal, adaptation: adaptation))
            let made = SessionWebSocketTask(driver: driver)
            if refusal == nil { registry.add(made) }
            if telemetry != nil || observation != nil {
                registry.add(.init(telemetry: telemetry, observation: observation), of: made)
            }
            observation?.taskMade(made)
            return made
        }
    }

    /// The subprotocols a request's `Sec-WebSocket-Protocol` offers.
    private static func offeredProtocols(in request: URLRequest) -> [String] {
        (request.value(forHTTPHeaderField: "Sec-WebSocket-Protocol") ?? "").split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespaces)
        }.filter { !$0.isEmpty }
    }

    /// The upgrade request's fields beyond the handshake's own: the request's, then each of `extras` (the manager's,
    /// ``managerFields(for:_:)``) whose name it lacks.
    private static func upgradeFields(
        of request: URLRequest, extras: [(name: String, value: String)]
    ) -> [(name: String, value: String)] {
        var fields = (request.allHTTPHeaderFields ?? [:]).sorted { $0.key < $1.key }.map {
            (name: $0.key, value: $0.value)
        }
        for extra in extras
        where !fields.contains(where: { $0.name.equalsIgnoringASCIICase(extra.name) }) {
            fields.append(extra)
        }
        return fields
    }

    /// What the manager adds to an upgrade request that lacks it, in order: the configuration's additional headers,
    /// its cookies for the URL, and the Basic credentials of its URL.
    private static func managerFields(
        for request: URLRequest, _ configuration: URLSessionConfiguration
    ) -> [(name: String, value: String)] {
        var fields = configuration.additionalHeaderFields.sorted(by: { $0.key < $1.key }).map {
            (name: $0.key, value: $0.value)
        }
        if request.httpShouldHandleCookies, let jar = CookieJar(configuration),
            let url = WebSocketDriver.httpURL(for: request.url), let cookies = jar.header(for: url)
        {
            fields.append(("Cookie", cookies))
        }
        if let url = request.url, let user = url.user {
            let password = url.password ?? ""
            let credentials = "\(user.removingPercentEncoding ?? user):\(password.removingPercentEncoding ?? password)"
            fields.append(("Authorization", "Basic " + Data(credentials.utf8).base64EncodedString()))
        }
        return fields
    }

    /// The handshake of `request` (adapted) for a task made for `endpoint`: an adapter may change the upgrade
    /// request's fields, not where it connects.
    private static func adaptedHandshake(
        _ request: URLRequest, endpoint: (host: String, port: Int, secure: Bool)?,
        extras: [(name: String, value: String)]
    ) throws -> WebSocketHandshake {
        guard let url = request.url, let adapted = WebSocketHandshake.endpoint(of: url), let endpoint,
            adapted == endpoint
        else {
            throw SessionKitError.session(
                .invalidRequestField,
                "An adapter changed the WebSocket upgrade's URL to \(request.url?.absoluteString ?? "nil"): it may "
                    + "change the request's fields, not the endpoint the task connects to.")
        }
        let handshake = WebSocketHandshake(
            url: url, key: WebSocketHandshake.makeKey(), protocols: offeredProtocols(in: request),
            fields: upgradeFields(of: request, extras: extras))
        if let fieldError = handshake.fieldError { throw fieldError }
        return handshake
    }
}
