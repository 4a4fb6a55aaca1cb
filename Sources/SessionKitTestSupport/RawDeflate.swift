import Foundation

#if canImport(CZlib)
    import CZlib
#else
    // The benchmark package compiles these sources with its own module of the same two functions.
    import CBenchZlib
#endif

/// One raw DEFLATE stream of zlib (RFC 7692's permessage-deflate), kept apart from the client's own so that the
/// test server checks the client against a second implementation: it compresses a message with a sync flush and
/// drops the trailing `00 00 ff ff`, or inflates one with those bytes appended, keeping its window between messages
/// until ``reset()``.
///
/// ```swift
/// let deflater = RawDeflate(compressing: true)
/// let payload = deflater.compress(Data("Hello".utf8))  // f2 48 cd c9 c9 07 00
/// ```
public final class RawDeflate {
    private let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private let compressing: Bool

    /// A compressing (`true`) or inflating stream with a window of 2^`windowBits` bytes.
    public init(compressing: Bool, windowBits: Int32 = 15) {
        self.compressing = compressing
        stream.initialize(to: z_stream())
        _ = compressing ? sk_zlib_deflate_init(stream, windowBits) : sk_zlib_inflate_init(stream, windowBits)
    }

    deinit {
        _ = compressing ? deflateEnd(stream) : inflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// Forgets the window (no context takeover).
    public func reset() {
        _ = compressing ? deflateReset(stream) : inflateReset(stream)
    }

    /// `message` compressed, without the flush's trailing `00 00 ff ff`.
    public func compress(_ message: Data) -> Data {
        // An empty stored block: zlib gives nothing for a flush right after a flush (RFC 7692 7.2.3.6).
        if message.isEmpty { return Data([0x00]) }
        let output = run(message, flush: Z_SYNC_FLUSH) { deflate($0, $1) } ?? Data()
        return output.count >= 4 ? Data(output.dropLast(4)) : output
    }

    /// A compressed message's payload inflated (`00 00 ff ff` appended first); nil when it is not DEFLATE data.
    public func decompress(_ payload: Data) -> Data? {
        run(payload + Data([0x00, 0x00, 0xFF, 0xFF]), flush: Z_SYNC_FLUSH) { inflate($0, $1) }
    }

    /// `body` (deflate or inflate) over `input` until it is consumed and the output flushed.
    private func run(
        _ input: Data, flush: Int32, _ body: (UnsafeMutablePointer<z_stream>, Int32) -> Int32
    ) -> Data? {
        var output = Data()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var bytes = [UInt8](input)
        let ok = bytes.withUnsafeMutableBufferPointer { input -> Bool in
            stream.pointee.next_in = input.baseAddress
            stream.pointee.avail_in = uInt(input.count)
            // A test server's messages are at most a few hundred megabytes inflated: bounded at 100,000 rounds.
            for _ in 0..<100_000 {
                let (status, produced, full) = chunk.withUnsafeMutableBufferPointer { out -> (Int32, Int, Bool) in
                    stream.pointee.next_out = out.baseAddress
                    stream.pointee.avail_out = uInt(out.count)
                    let status = body(stream, flush)
                    return (status, out.count - Int(stream.pointee.avail_out), stream.pointee.avail_out == 0)
                }
                output.append(contentsOf: chunk[0..<produced])
                if status == Z_STREAM_END { return true }
                guard status == Z_OK || status == Z_BUF_ERROR else { return false }
                if !full && stream.pointee.avail_in == 0 { return true }
            }
            return false
        }
        return ok ? output : nil
    }
}
