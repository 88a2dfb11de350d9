import HTTPTypes
import Foundation
import HummingbirdCore
import NIOCore
import NIOHTTPTypes
import Synchronization

/// Who keeps a console connection: one that has not sent a complete request within `requestTimeout` is closed,
/// and connections that have not shown the token yet are at most `unauthenticatedLimit` (the rest of
/// `maxConnections` is kept for those that have): one more closes the oldest of them. So idle or unauthenticated
/// clients, however many, never keep a viewer with the token out.
final class ConsoleAdmission: Sendable {
    let token: String
    let requestTimeout: TimeAmount
    let unauthenticatedLimit: Int
    /// Connections that have not shown the token, oldest first.
    private let unauthenticated = Mutex<[(id: ObjectIdentifier, channel: any Channel)]>([])

    init(token: String, requestTimeout: Duration, unauthenticatedLimit: Int) {
        self.token = token
        self.requestTimeout = TimeAmount(requestTimeout)
        self.unauthenticatedLimit = max(1, unauthenticatedLimit)
    }

    func handler() -> ConsoleAdmissionHandler { ConsoleAdmissionHandler(admission: self) }

    /// A new connection; returns the one it displaces, if any.
    fileprivate func admitted(_ channel: any Channel) -> (any Channel)? {
        unauthenticated.withLock { list in
            list.append((ObjectIdentifier(channel), channel))
            return list.count > unauthenticatedLimit ? list.removeFirst().channel : nil
        }
    }

    fileprivate func authenticated(_ channel: any Channel) { forget(channel) }

    fileprivate func forget(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        unauthenticated.withLock { $0.removeAll { $0.id == id } }
    }

    /// Whether the request shows the token: the console's cookie, a bearer header, or the login link's query.
    fileprivate func showsToken(_ request: HTTPRequest) -> Bool {
        for field in request.headerFields[values: .cookie] {
            for pair in field.split(separator: ";") {
                let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0] == ConsoleServer.cookieName, sameToken(String(parts[1]), token) { return true }
            }
        }
        if let header = request.headerFields[.authorization], header.hasPrefix("Bearer "), sameToken(String(header.dropFirst(7)), token) {
            return true
        }
        if let path = request.path, path.hasPrefix("/login?") {
            for pair in path.dropFirst("/login?".count).split(separator: "&") where pair.hasPrefix("token=") {
                if sameToken(String(pair.dropFirst("token=".count)), token) { return true }
            }
        }
        return false
    }
}

/// One connection's part of `ConsoleAdmission`, after HTTP decoding.
final class ConsoleAdmissionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private let admission: ConsoleAdmission
    private var deadline: Scheduled<Void>?
    private var registered = false

    init(admission: ConsoleAdmission) { self.admission = admission }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    private func start(_ context: ChannelHandlerContext) {
        guard !registered else { return }
        registered = true
        if let displaced = admission.admitted(context.channel) { displaced.close(promise: nil) }
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: admission.requestTimeout) { channel.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let request):
            if admission.showsToken(request) { admission.authenticated(context.channel) }
        case .end:
            deadline?.cancel()
            deadline = nil
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        admission.forget(context.channel)
        context.fireChannelInactive()
    }
}
