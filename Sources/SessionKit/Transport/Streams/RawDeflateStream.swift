internal import CZlib
import Foundation

/// One raw DEFLATE stream of zlib (no zlib header), compressing or inflating, that keeps its LZ77 window from call
/// to call until ``reset()``: the compression context of permessage-deflate (RFC 7692), one per direction of a
/// WebSocket connection.
///
/// Inflating is bounded: output is produced in steps of at most 16 KiB and stops one byte past the caller's limit,
/// so that a small message that inflates to gigabytes (a decompression bomb) costs no more memory than the limit.
final class RawDeflateStream: @unchecked Sendable {
    // @unchecked Sendable: the z_stream and the output buffer are touched only by the stream's one owner, a
    // WebSocket lifecycle, under its driver's lock.

    /// Which way the bytes go.
    enum Direction: Sendable {
        case compress
        case decompress
    }

    /// The most bytes one step of zlib writes.
    static let stepSize = 16 * 1024

    let direction: Direction
    private let stream: UnsafeMutablePointer<z_stream>
    private let step: UnsafeMutablePointer<UInt8>

    /// A stream with a window of 2^`windowBits` bytes: 9…15 to compress (zlib's raw deflate has no 8), 8…15 to
    /// inflate; nil when zlib refuses the window or has no memory.
    init?(_ direction: Direction, windowBits: Int) {
        let range = direction == .compress ? 9...15 : 8...15
        guard range.contains(windowBits) else { return nil }
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let status =
            direction == .compress
            ? sk_zlib_deflate_init(stream, Int32(windowBits)) : sk_zlib_inflate_init(stream, Int32(windowBits))
        guard status == Z_OK else {
            stream.deinitialize(count: 1)
            stream.deallocate()
            return nil
        }
        self.direction = direction
        self.stream = stream
        step = UnsafeMutablePointer<UInt8>.allocate(capacity: Self.stepSize)
    }

    deinit {
        if direction == .compress { deflateEnd(stream) } else { inflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
        step.deallocate()
    }

    /// Forgets the window: what comes next refers to nothing before it (no context takeover).
    func reset() {
        if direction == .compress { deflateReset(stream) } else { inflateReset(stream) }
    }

    /// Restarts the inflater after the end of a DEFLATE stream with the window it had.
    private func restartKeepingWindow() {
        var window = [UInt8](repeating: 0, count: 1 << 15)
        var length: uInt = 0
        let saved = inflateGetDictionary(stream, &window, &length) == Z_OK
        inflateReset(stream)
        if saved, length > 0 { inflateSetDictionary(stream, window, length) }
    }

    /// `message` compressed and flushed to a byte boundary, without the flush's empty block's `00 00 ff ff` (RFC
    /// 7692 7.2.1); nil if zlib failed, after which the stream must be reset.
    func compress(_ message: Data) -> Data? {
        guard direction == .compress else { return nil }
        // An empty stored block, as a sync flush of nothing gives (RFC 7692 7.2.3.6); zlib gives nothing for a
        // flush right after a flush, and the window is the same either way.
        if message.isEmpty { return Data([0x00]) }
        var output = Data()
        let finished = message.withUnsafeBytes { raw -> Bool in
            stream.pointee.next_in = UnsafeMutablePointer(mutating: raw.bindMemory(to: Bytef.self).baseAddress)
            stream.pointee.avail_in = uInt(raw.count)
            defer {
                stream.pointee.next_in = nil
                stream.pointee.avail_in = 0
            }
            // Deflate's output exceeds its input by a few bytes per 16 KiB block at most: each round but the last
            // fills a whole step, so twice the input's steps, plus a few, are always enough.
            for _ in 0...(raw.count / (Self.stepSize / 2) + 4) {
                stream.pointee.next_out = step
                stream.pointee.avail_out = uInt(Self.stepSize)
                let status = deflate(stream, Z_SYNC_FLUSH)
                guard status == Z_OK || status == Z_BUF_ERROR else { return false }
                let produced = Self.stepSize - Int(stream.pointee.avail_out)
                output.append(step, count: produced)
                if stream.pointee.avail_out > 0 && stream.pointee.avail_in == 0 { return true }
            }
            return false
        }
        guard finished, output.count >= 4, output.suffix(4) == Data([0x00, 0x00, 0xFF, 0xFF]) else { return nil }
        return Data(output.dropLast(4))
    }

    /// Inflates `input` (a compressed message's next fragment; the last with `00 00 ff ff` appended by the caller)
    /// into at most `limit` bytes.
    ///
    /// - Throws: `tooBig` (1009) as soon as the output would pass `limit`, having held at most `limit + 1` bytes;
    ///   `invalidPayload` (1007) for bytes that are not DEFLATE data.
    func decompress(_ input: Data, limit: Int) throws(WebSocketFailure) -> Data {
        guard direction == .decompress else { throw .invalidPayload("A compressed message cannot be inflated.") }
        let limit = max(0, limit)
        var output = Data()
        let failure = input.withUnsafeBytes { raw -> WebSocketFailure? in
            stream.pointee.next_in = UnsafeMutablePointer(mutating: raw.bindMemory(to: Bytef.self).baseAddress)
            stream.pointee.avail_in = uInt(raw.count)
            defer {
                stream.pointee.next_in = nil
                stream.pointee.avail_in = 0
            }
            // Each round that does not end fills its whole room, and the rooms add up to `limit + 1` at most: the
            // round after that has passed the limit.
            for _ in 0...(limit / Self.stepSize + 2) {
                let room = min(Self.stepSize, limit - output.count + 1)
                stream.pointee.next_out = step
                stream.pointee.avail_out = uInt(room)
                let status = inflate(stream, Z_SYNC_FLUSH)
                output.append(step, count: room - Int(stream.pointee.avail_out))
                if output.count > limit {
                    return .tooBig("A compressed message inflates past the limit of \(limit) bytes.")
                }
                switch status {
                case Z_STREAM_END:
                    // A final block ended the DEFLATE stream (RFC 7692 7.2.3.3): the next message starts a new one,
                    // which may still refer to this one's bytes, so the window is carried over.
                    restartKeepingWindow()
                    return nil
                case Z_BUF_ERROR:
                    return nil
                case Z_OK:
                    if stream.pointee.avail_out > 0 && stream.pointee.avail_in == 0 { return nil }
                default:
                    return .invalidPayload("A compressed message is not valid DEFLATE data.")
                }
            }
            return .invalidPayload("A compressed message did not inflate in bounded steps.")
        }
        if let failure { throw failure }
        return output
    }
}
