import Dispatch

/// Where a manager's completions and task-did-complete notifications run: the completion queue, inside the
/// completion group, as AFNetworking runs them.
///
/// A queue the caller set is sent one hop per piece of work: it may be concurrent, where each piece must stay free
/// to run beside the others. The manager's own queue is serial, so its hops are shared: work handed over while an
/// earlier hop still waits to run goes with that hop, in the order it was handed over. When many requests complete
/// together (the delegate queue drains a burst of them), that wakes the queue's thread once rather than once per
/// request; with 64 requests in flight, the hop per completion cost the async verbs up to a quarter of their rate.
struct CompletionQueue: Sendable {
    /// The queue the work runs on.
    let queue: DispatchQueue
    /// The group each piece counts in, from the moment it is handed over until it has run.
    let group: DispatchGroup
    /// The shared hops of the manager's own serial queue; nil for a caller's queue.
    private let batch: Batch?

    /// A queue the caller set (or any queue not known to be serial): one hop per piece of work.
    init(callers queue: DispatchQueue, group: DispatchGroup) {
        (self.queue, self.group, batch) = (queue, group, nil)
    }

    /// The manager's own serial queue, whose hops `batch` shares.
    init(own batch: Batch, group: DispatchGroup) {
        (queue, self.group, self.batch) = (batch.queue, group, batch)
    }

    /// Runs `work` on the queue, inside the group.
    func async(_ work: @escaping @Sendable () -> Void) {
        guard let batch else {
            queue.async(group: group, execute: work)
            return
        }
        batch.async(group: group, work)
    }

    /// The work waiting for a serial queue's next hop, which runs all of it in order.
    final class Batch: Sendable {
        // Sendable: `pending` is a `Protected` box (its lock guards every access); `queue` is immutable.

        /// A piece of work and the group it counts in.
        private typealias Piece = (work: (@Sendable () -> Void)?, group: DispatchGroup)

        /// The serial queue the hops go to.
        let queue: DispatchQueue
        /// Handed over and not yet taken by a hop; a hop is on its way exactly when this is not empty.
        private let pending = Protected<[Piece]>([])

        /// Shares the hops to `queue`, which must be serial: the work of one hop runs one piece after another.
        init(serial queue: DispatchQueue) {
            self.queue = queue
        }

        /// Runs `work` on the queue in a hop already on its way, or in a new one; inside `group` until it has run.
        func async(group: DispatchGroup, _ work: @escaping @Sendable () -> Void) {
            group.enter()
            let startsHop = pending.write { pending -> Bool in
                pending.append((work, group))
                return pending.count == 1
            }
            if startsHop { queue.async { self.run() } }
        }

        /// The hop: takes what is waiting (work handed over from now on starts the next hop) and runs it in order.
        private func run() {
            var pieces = pending.write { pending -> [Piece] in
                defer { pending = [] }
                return pending
            }
            for index in pieces.indices {
                pieces[index].work?()
                // Released before its group is left, as `queue.async(group:)` releases its block: a waiter on the
                // group finds what the piece held (a task, its body, the caller's closure) gone.
                pieces[index].work = nil
                pieces[index].group.leave()
            }
        }
    }
}
