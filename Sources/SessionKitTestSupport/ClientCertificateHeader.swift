import NIOCore
import NIOHTTP1
import NIOSSL

/// Adds to each request the common name of the certificate the client presented on its TLS connection, as a
/// gateway does (`X-Client-Certificate: <CN>`, or `none`), replacing any value the client sent: the endpoints that
/// echo headers show which identity the server saw on the connection that carried the request, and the request log
/// keeps it.
final class ClientCertificateHeader: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    /// The header's name.
    static let field = "X-Client-Certificate"

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var part = unwrapInboundIn(data)
        if case .head(var head) = part {
            head.headers.remove(name: Self.field)
            let certificate = (try? context.pipeline.syncOperations.nioSSL_peerCertificate()) ?? nil
            head.headers.add(name: Self.field, value: certificate.flatMap(Self.commonName(of:)) ?? "none")
            part = .head(head)
        }
        context.fireChannelRead(wrapInboundOut(part))
    }

    /// The subject's common name, read from NIOSSL's description (`<NIOSSLCertificate;…;common_name=CN;…>`).
    private static func commonName(of certificate: NIOSSLCertificate) -> String? {
        let text = certificate.description
        guard let start = text.range(of: ";common_name=") else { return nil }
        let rest = text[start.upperBound...]
        return String(rest.prefix { $0 != ";" && $0 != ">" })
    }
}
