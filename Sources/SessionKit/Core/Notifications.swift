import Foundation

extension Notification.Name {
    /// Posted when a task is resumed through a manager (``URLSessionManager/resume(_:)``, the HTTP verbs, or its
    /// `Progress`). The object is the task.
    public static let sessionKitTaskDidResume = Notification.Name("com.sessionkit.networking.task.resume")
    /// Posted when a task is suspended through a manager (``URLSessionManager/suspend(_:)`` or its `Progress`).
    /// The object is the task.
    public static let sessionKitTaskDidSuspend = Notification.Name("com.sessionkit.networking.task.suspend")
    /// Posted on the completion queue right after a task's completion handler ran. The object is the task; the
    /// `userInfo` keys are in ``SessionKitNotificationKey``.
    public static let sessionKitTaskDidComplete = Notification.Name("com.sessionkit.networking.task.complete")
    /// Posted when a manager's session became invalid. The object is the session; `userInfo` carries
    /// ``SessionKitNotificationKey/error`` when it ended with an error.
    public static let sessionKitSessionDidInvalidate = Notification.Name("com.sessionkit.networking.session.invalidate")
    /// Posted on the delegate queue when a finished download was moved to the destination its task or the manager
    /// chose (AFNetworking's `AFURLSessionDownloadTaskDidMoveFileSuccessfullyNotification`). The object is the task;
    /// there is no `userInfo`.
    public static let sessionKitDownloadTaskDidMoveFileSuccessfully = Notification.Name(
        "com.sessionkit.networking.session.download.file-manager-succeed")
    /// Posted on the delegate queue when a finished download could not be moved to its destination
    /// (AFNetworking's `AFURLSessionDownloadTaskDidFailToMoveFileNotification`). The object is the task; the
    /// `userInfo` is the file manager's error's `userInfo`. The task then fails with
    /// ``SessionKitError/Code/cannotMoveDownloadedFile``.
    public static let sessionKitDownloadTaskDidFailToMoveFile = Notification.Name(
        "com.sessionkit.networking.session.download.file-manager-error")
}

/// The `userInfo` keys of SessionKit's notifications, as AFNetworking's `AFNetworkingTaskDidComplete…Key`.
public enum SessionKitNotificationKey {
    /// The response serializer that ran for the task.
    public static let responseSerializer = "com.sessionkit.networking.task.complete.responseserializer"
    /// The body `Data` of a data or upload task (absent when empty).
    public static let responseData = "com.sessionkit.networking.complete.finish.responsedata"
    /// The object the response serializer returned.
    public static let serializedResponse = "com.sessionkit.networking.task.complete.serializedresponse"
    /// The error the task ended with: transport, serialization or file move.
    public static let error = "com.sessionkit.networking.task.complete.error"
    /// The file URL a download was moved to.
    public static let assetPath = "com.sessionkit.networking.task.complete.assetpath"
}
