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

    /// Delivers the outcome of `task`: its in-memory body `data`, the file a download was moved to, and the error
    /// it ended with (nil for success).
    func deliver(task: URLSessionTask, data: Data, fileURL: URL?, error finalError: NSError?) {
        let delivery = self.delivery
        let completion = self.completion
        let received = ReceivedResponse.of(task)
        let observation = self.observation
        if let observation {
            observation.monitor.request(
                observation.request, didCompleteTask: task, error: finalError.map(Self.swiftError))
        }
        delivery.completionGroup.enter()
        delivery.processingQueue.async {
            var object: Any? = nil
            var resultError: Error? = finalError.map(Self.swiftError)
            if finalError == nil {
                do {
                    // A serializer that never reads the response (the HTTP core API's, a stream's) is not asked: the
                    // response's Foundation object is then built only if the caller asks for it.
                    if !(delivery.responseSerializer is UnvalidatedResponseSerializer) {
                        object = try delivery.responseSerializer.responseObject(
                            for: received?.urlResponse, data: fileURL == nil ? data : nil)
                    }
                } catch {
                    resultError = error
                    // As AFNetworking: what the serializer still made of a body whose status failed goes to the
                    // completion handler and the notification, next to the error.
                    object = (error as NSError).userInfo[SessionKitError.failingResponseObjectKey]
                }
                if let observation {
                    observation.monitor.request(observation.request, didSerialize: object, error: resultError)
                }
            }
            if let fileURL { object = fileURL }
            let outcome = TaskOutcome(
                task: task, received: received, data: data, object: object, fileURL: fileURL, error: resultError)
            delivery.completionQueue.async {
                defer { delivery.completionGroup.leave() }
                completion(outcome)
                NotificationCenter.default.post(
                    name: .sessionKitTaskDidComplete, object: task,
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
    ) -> [String: Any] {
        var userInfo: [String: Any] = [SessionKitNotificationKey.responseSerializer: serializer]
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
