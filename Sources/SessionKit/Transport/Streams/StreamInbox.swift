import Foundation

/// The bytes a stream task received and has not handed to a read yet, in one buffer that lets go of what was read:
/// what it holds stays about what is unread, however long the stream runs.
///
/// Not a `Data` with `removeFirst(_:)`: that only moves the start of a slice, and the storage would keep every byte
/// ever appended. Here the bytes read stay in front only until they are as many as the unread ones (then the unread
/// ones move to a buffer of their own), and an emptied buffer is dropped, so that each byte is copied at most once
/// more on average, not once per read.
struct StreamInbox {
    /// The received bytes, the first ``consumed`` of which were handed out; its indices start at 0.
    private var storage = Data()
    /// How many bytes at the front of ``storage`` were handed out.
    private var consumed = 0
    /// Bytes read may stay in front until there are this many (and as many as unread ones): small buffers are not
    /// worth a copy.
    private static let compactionFloor = 64 * 1024

    /// The bytes received and not read.
    var count: Int { storage.count - consumed }

    var isEmpty: Bool { count == 0 }

    /// The bytes the buffer holds, read or not: at most the unread ones plus as many read ones (or
    /// ``compactionFloor``).
    var retainedByteCount: Int { storage.count }

    /// Adds bytes received: what one receive produced, in a buffer of its own.
    mutating func append(_ data: Data) {
        guard !data.isEmpty else { return }
        if storage.isEmpty && data.startIndex == 0 {
            // A received chunk becomes the buffer as it is: no copy until a second one comes.
            storage = data
            return
        }
        storage.append(data)
    }

    /// Takes the first `count` unread bytes (all of them when fewer are there).
    mutating func removeFirst(_ count: Int) -> Data {
        let count = min(max(0, count), self.count)
        if consumed == 0 && count == storage.count {
            // All of it: the buffer itself is handed out, without a copy.
            defer { removeAll() }
            return storage
        }
        let taken = storage.subdata(in: consumed..<consumed + count)
        consumed += count
        if consumed == storage.count {
            removeAll()
        } else if consumed >= Self.compactionFloor && consumed >= self.count {
            storage = storage.subdata(in: consumed..<storage.count)
            consumed = 0
        }
        return taken
    }

    /// Drops every byte.
    mutating func removeAll() {
        storage = Data()
        consumed = 0
    }
}
