import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2

/// The loopback server's HTTP/2 connection endpoints:
/// - `/reset?code=N`: over HTTP/2, resets the request's stream (RST_STREAM) with error code N (default 2,
///   INTERNAL_ERROR) and sends no response; over HTTP/1.1, closes the connection.
/// - `/goaway`: over HTTP/2, answers `{"stream": ID}`, then 50 ms later sends GOAWAY (NO_ERROR, this stream the last
///   one) and leaves the connection open, as a server going away gracefully may: RFC 9113 6.8 says a client opens no
///   new stream on it, and that a stream above the last one was not processed. Over HTTP/1.1, a plain answer.
extension HTTPBinHandler {
    func resetStream(_ context: ChannelHandlerContext, _ request: Request) {
        guard let (connection, streamID) = http2Stream(context, request) else { return context.close(promise: nil) }
        let code = HTTP2ErrorCode(networkCode: Int(request.query["code"] ?? "") ?? 2)
        connection.writeAndFlush(HTTP2Frame(streamID: streamID, payload: .rstStream(code)), promise: nil)
    }

    func goAway(_ context: ChannelHandlerContext, _ request: Request) {
        guard let (connection, streamID) = http2Stream(context, request) else {
            return respond(context, request, json: ["stream": NSNull()])
        }
        respond(context, request, json: ["stream": Int(streamID)])
        context.eventLoop.scheduleTask(in: .milliseconds(50)) {
            let frame = HTTP2Frame(
                streamID: .rootStream, payload: .goAway(lastStreamID: streamID, errorCode: .noError, opaqueData: nil))
            connection.writeAndFlush(frame, promise: nil)
        }
    }

    /// The HTTP/2 connection and stream `request` came on; nil over HTTP/1.1.
    private func http2Stream(_ context: ChannelHandlerContext, _ request: Request) -> (Channel, HTTP2StreamID)? {
        guard request.head.version.major == 2, let connection = context.channel.parent,
            let streamID = try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)
        else { return nil }
        return (connection, streamID)
    }
}
