import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Delivers the end of one task: runs the response serializer off the delegate queue, then calls the completion
/// and posts `Notification.Name.sessionKitTaskDidComplete` on the completion queue, inside the completion group,
/// and tells the request pipeline's monitor along the way.
///
/// ``TaskDelegate`` calls ``deliver(task:data:fileURL:error:)`` once, when its ``TaskLifecycle`` says to.
struct CompletionDelivery {
    /// The serializer and the queues.
    let delivery: TaskDelegate.Delivery
    /// The pipeline request the task is an attempt of, and its monitor; nil outside the request pipeline.
    let observation: TaskDelegate.Observation?
    /// The caller's completion.
    let completion: @Sendable (TaskOutcome) -> Void

    /// What the response serializer made of a response: its object and its error.
    typealias Serialized = (object: Any?, error: Error?)

    /// Delivers the outcome of `task`: its in-memory body `data`, the file a download was moved to, and the error
    /// it ended with (nil for success). Called on the delegate queue. `serialized` is the serializer's result when it
    /// was made already, for the retriers (a task of a manager with an interceptor): it is not made twice.
    ///
    /// The serializer runs on the processing queue when it has to read the body; a result that needs no reading (an
    /// error, a serializer that reads nothing, a status that alone decides) is made here, without that hop. A caller's
    /// completion runs on the completion queue, in the completion group; a pipeline's (``TaskDelegate/Delivery``'s
    /// `completesInPlace`: it only resumes the awaiting Swift task) runs where the outcome is ready.
    /// `chosenError` is the error a retrier chose to end the task with (``RetryDecision/doNotRetryWithError(_:)``),
    /// which the caller gets as it is.
    func deliver(
        task: any TaskReference, data: Data, fileURL: URL?, error finalError: NSError?, serialized: Serialized? = nil,
        chosenError: Error? = nil
    ) {
        let received = task.receivedResponse
        observation?.taskDidComplete(
            task, error: chosenError ?? finalError.map(Self.swiftError), transportError: finalError)
        if let chosenError {
            return complete(
                task: task, received: received, data: data, object: nil, fileURL: fileURL, error: chosenError)
        }
        let body = fileURL == nil ? data : nil
        if let result = (finalError == nil ? serialized : nil)
            ?? serializedWithoutReading(received: received, body: body, error: finalError)
        {
            return finish(task: task, received: received, data: data, fileURL: fileURL, error: finalError, result)
        }
        delivery.processingQueue.async { [self] in
            let result = serializedReading(received: received, body: body)
            finish(task: task, received: received, data: data, fileURL: fileURL, error: nil, result)
        }
    }

    /// What the response serializer makes of `received` and its body: made here when no body has to be read (an
    /// error, a serializer that reads nothing, a status that alone decides), else on the processing queue, where
    /// `then` then runs.
    func serialize(
        received: ReceivedResponse?, data: Data, fileURL: URL?, error finalError: NSError?,
        then: @escaping @Sendable (Serialized) -> Void
    ) {
        let body = fileURL == nil ? data : nil
        if let result = serializedWithoutReading(received: received, body: body, error: finalError) {
            return then(result)
        }
        delivery.processingQueue.async { [self] in then(serializedReading(received: received, body: body)) }
    }

    /// Tells the monitor what the serializer made of a response that came (`error` nil), then completes.
    private func finish(
        task: any TaskReference, received: ReceivedResponse?, data: Data, fileURL: URL?, error: NSError?,
        _ result: Serialized
    ) {
        if error == nil, let observation {
            observation.monitor.request(observation.request, didSerialize: result.object, error: result.error)
        }
        complete(
            task: task, received: received, data: data, object: result.object, fileURL: fileURL, error: result.error)
    }

    /// The result that needs no reading of the body (an error, a serializer that reads nothing, a status that alone
    /// decides for the plain HTTP serializer); nil when the serializer must read the body.
    private func serializedWithoutReading(received: ReceivedResponse?, body: Data?, error: NSError?) -> Serialized? {
        if let error { return (nil, Self.swiftError(error)) }
        if delivery.responseSerializer is UnvalidatedResponseSerializer {
            // A serializer that never reads the response (the HTTP core API's, a stream's) is not asked: the
            // response's Foundation object is then built only if the caller asks for it.
            return (nil, nil)
        }
        // The plain HTTP serializer reads no body: when the head decides, no `HTTPURLResponse`, no processing-queue
        // hop.
        guard let serializer = delivery.responseSerializer as? HTTPResponseSerializer,
            type(of: serializer) == HTTPResponseSerializer.self,
            let passed = Self.objectFromHead(of: received, by: serializer, body: body)
        else { return nil }
        return (passed, nil)
    }

    /// The serializer's result on the whole response (the processing queue's work).
    private func serializedReading(received: ReceivedResponse?, body: Data?) -> Serialized {
        let serializer = delivery.responseSerializer
        do {
            // The JSON serializer's success, validated from the head: no `HTTPURLResponse`. The plain HTTP
            // serializer's answer from the head was nil already (on the delegate queue): not asked twice.
            if let own = serializer as? HTTPResponseSerializer, type(of: own) != HTTPResponseSerializer.self,
                let passed = Self.objectFromHead(of: received, by: own, body: body)
            {
                return (passed, nil)
            }
            return (try serializer.responseObject(for: received?.urlResponse, data: body), nil)
        } catch {
            // As AFNetworking: what the serializer still made of a body whose status failed goes to the completion
            // handler and the notification, next to the error.
            return ((error as NSError).userInfo[SessionKitError.failingResponseObjectKey], error)
        }
    }

    /// What a serializer of SessionKit's own makes of a head not yet built into an `HTTPURLResponse`; nil when it
    /// needs the whole response.
    private static func objectFromHead(
        of received: ReceivedResponse?, by serializer: HTTPResponseSerializer, body: Data?
    ) -> Any?? {
        guard let received, !received.isBuilt, let lines = received.fieldLines else { return nil }
        return serializer.objectWithoutResponse(
            statusCode: received.statusCode, mimeType: { MIMEType.ofContentType(lines) }, data: body)
    }

    /// Hands the outcome to the completion (on the completion queue, or in place), and posts the notification.
    private func complete(
        task: any TaskReference, received: ReceivedResponse?, data: Data, object: Any?, fileURL: URL?, error: Error?
    ) {
        let outcome = TaskOutcome(
            reference: task, received: received, data: data, object: fileURL ?? object, fileURL: fileURL, error: error)
        let delivery = self.delivery
        let completion = self.completion
        if delivery.completesInPlace {
            completion(outcome)
            guard delivery.announces else { return }
        }
        delivery.completionQueue.async {
            if !delivery.completesInPlace { completion(outcome) }
            if delivery.announces {
                NotificationCenter.default.post(
                    name: .sessionKitTaskDidComplete, object: task.task,
                    userInfo: Self.notificationUserInfo(outcome, serializer: delivery.responseSerializer))
            }
        }
    }

    /// URLSession on Linux reports transport failures as `NSError`s that Swift's `catch let error as URLError`
    /// does not match: hand them over as `URLError`s, with the same code and `userInfo`.
    static func swiftError(_ error: NSError) -> Error {
        guard error.domain == NSURLErrorDomain, let code = URLError.Code(rawValue: error.code) else { return error }
        return URLError(code, userInfo: error.userInfo)
    }

    /// AFNetworking's `userInfo` for the task-did-complete notification.
    private static func notificationUserInfo(
        _ outcome: TaskOutcome, serializer: URLResponseSerialization
    ) -> [AnyHashable: Any] {
        // Typed as `post(name:object:userInfo:)` takes it (a `[String: Any]` is converted at every post), and sized
        // for its four keys up front (a literal of one would grow, rehashing, as the others go in).
        var userInfo = [AnyHashable: Any](minimumCapacity: 4)
        userInfo[SessionKitNotificationKey.responseSerializer] = serializer
        if let fileURL = outcome.fileURL {
            userInfo[SessionKitNotificationKey.assetPath] = fileURL
        } else if !outcome.data.isEmpty {
            userInfo[SessionKitNotificationKey.responseData] = outcome.data
        }
        if let error = outcome.error { userInfo[SessionKitNotificationKey.error] = error }
        if let object = outcome.object { userInfo[SessionKitNotificationKey.serializedResponse] = object }
        return userInfo
    }
}
