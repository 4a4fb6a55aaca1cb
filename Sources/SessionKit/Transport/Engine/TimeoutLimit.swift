import Foundation

/// Which of a task's time limits ended it with `URLError.timedOut` on the curl transport: the value under
/// ``SessionKitError/timeoutLimitKey`` in the error's `userInfo`, and the end of its description.
enum TimeoutLimit: String, Sendable {
    /// No byte moved for the configuration's `timeoutIntervalForRequest` (or no connection was made in that time).
    case request = "timeoutIntervalForRequest"
    /// The whole task, redirects included, outlasted the configuration's `timeoutIntervalForResource`.
    case resource = "timeoutIntervalForResource"
    /// No response head began within the manager's ``URLSessionManager/timeoutIntervalForResponseHead`` of the
    /// request's last byte sent.
    case responseHead = "timeoutIntervalForResponseHead"
}

extension SessionKitError {
    /// `userInfo` key of a curl-transport `URLError.timedOut`: the name of the limit that fired,
    /// `"timeoutIntervalForRequest"` (idle), `"timeoutIntervalForResource"` (total) or
    /// `"timeoutIntervalForResponseHead"` (time to the first byte of the response head).
    ///
    /// ```swift
    /// catch let error as URLError where error.code == .timedOut {
    ///     if error.userInfo[SessionKitError.timeoutLimitKey] as? String == "timeoutIntervalForResponseHead" { … }
    /// }
    /// ```
    public static let timeoutLimitKey = "com.sessionkit.error.timeoutLimit"
}
