import Dispatch
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How the curl transport's tasks hand their work to the manager's delegate queue from threads that are not
/// libdispatch's own (the engine thread, a caller's thread): the work waits in a list, and a
/// `DispatchSourceUserDataAdd` on the queue runs all that waits, in the order it came.
///
/// A `DispatchQueue.async` from such a thread allocates its block's continuation from the heap every time, and the
/// libdispatch worker that runs the block keeps the freed continuation in a cache of its own (up to 1,024 per thread):
/// over a long run each worker that ever ran the delegate queue filled one, 0.3–0.6 MiB in all that a soak counted as
/// growth (heaptrack: the only allocation site still growing after 2,000 requests). Merging data into a source
/// allocates nothing, and its wake-ups merge: one run takes every task's work that came before it, as at 64 requests
/// in flight, where an engine pass ends many transfers at once.
final class DelegateQueueHop: @unchecked Sendable {
    // @unchecked Sendable: `pending` is a `Protected` box; `spare` is used by `run()` only, on the delegate queue (the
    // source's handler runs there, one run at a time), checked there; the rest is immutable.

    /// What a task asked to have run on the delegate queue.
    enum Work {
        /// Hand the events its transfers reported to the manager (``CurlTaskDriver/drain()``).
        case drain(CurlTaskDriver)
        /// Start its first transfer there, since the HTTP cache must read its `URLCache` first.
        case start(CurlTaskDriver, URLRequest)
    }

    /// The manager's delegate queue.
    let queue: DispatchQueue
    private let source: DispatchSourceUserDataAdd
    /// The work waiting for the next run; a run is on its way exactly when this is not empty.
    private let pending = Protected<[Work]>([])
    /// The list a run emptied, kept with its capacity for the next (delegate queue only).
    private var spare: [Work] = []

    /// A hop to `queue`, which must be serial.
    init(to queue: DispatchQueue) {
        self.queue = queue
        source = DispatchSource.makeUserDataAddSource(queue: queue)
        // Weak: the source keeps its handler, and this object keeps the source.
        source.setEventHandler { [weak self] in self?.run() }
        source.activate()
    }

    deinit {
        source.cancel()
    }

    /// Runs `work` on the delegate queue, after the work handed over before it.
    func async(_ work: Work) {
        let wakes = pending.write { pending -> Bool in
            pending.append(work)
            return pending.count == 1
        }
        if wakes { source.add(data: 1) }
    }

    /// The source's handler: takes what waits (work handed over from now on wakes the source again) and runs it.
    private func run() {
        dispatchPrecondition(condition: .onQueue(queue))
        var works: [Work] = []
        swap(&works, &spare)
        pending.write { swap(&$0, &works) }
        for work in works {
            switch work {
            case .drain(let driver): driver.drain()
            case .start(let driver, let request): driver.startOnDelegateQueue(request)
            }
        }
        works.removeAll(keepingCapacity: true)
        spare = works
    }
}
