import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Synchronization

/// The read-only web console (docs/console.md): pages that draw the latest `ConsoleSnapshots` document and follow
/// it by server-sent events. Every request but `/login` needs the access token (the cookie `/login` sets, or
/// `Authorization: Bearer`); requests with a body are refused; connections and event streams are bounded.
public struct ConsoleServer: Sendable {
    public struct Configuration: Sendable {
        public var host = "127.0.0.1"
        public var port = 8080
        public var token: String
        /// Open connections at most (further ones wait in the backlog); a quarter of them are kept for connections
        /// that have shown the token (`ConsoleAdmission`).
        public var maxConnections = 64
        /// Event streams at most; past it `/events` answers 503 and the page polls instead.
        public var maxStreams = 32
        /// A connection idle this long is closed.
        public var idleTimeout: Duration = .seconds(60)
        /// A connection that has not sent a complete request this long after it opened is closed.
        public var requestTimeout: Duration = .seconds(5)

        /// Connections that have not shown the token yet, at most.
        var unauthenticatedLimit: Int { max(1, maxConnections - maxConnections / 4) }

        public init(token: String) {
            self.token = token
        }
    }

    public static let cookieName = "beaconflow_console"

    /// The pages, each drawn by console.js from the document.
    public static let pages = ["/": "Sites", "/beacons": "Beacons", "/agents": "Agents", "/pipeline": "Pipeline"]

    /// The application, to run as a service; `onRunning` gets the port it listens on.
    public static func application(
        snapshots: ConsoleSnapshots, configuration: Configuration, logger: Logger, onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let router = Router(context: BasicRequestContext.self)
        let streams = Mutex(0)
        router.get("/login") { request, _ -> Response in
            let given = request.uri.queryParameters["token"].map(String.init) ?? ""
            guard sameToken(given, configuration.token) else {
                return ConsoleAssets.response(.unauthorized, ConsoleAssets.loginPage, type: "text/html; charset=utf-8")
            }
            let next = request.uri.queryParameters["next"].map(String.init).flatMap { pages[$0] == nil ? nil : $0 } ?? "/"
            var response = Response(status: .seeOther, headers: [.location: next])
            response.setCookie(Cookie(name: cookieName, value: configuration.token, path: "/", httpOnly: true, sameSite: .strict))
            return response
        }
        for (path, title) in pages {
            router.get(RouterPath(path)) { _, _ in
                ConsoleAssets.response(.ok, ConsoleAssets.page(path: path, title: title), type: "text/html; charset=utf-8")
            }
        }
        router.get("/console.js") { _, _ in ConsoleAssets.response(.ok, ConsoleAssets.script, type: "text/javascript; charset=utf-8") }
        router.get("/console.css") { _, _ in ConsoleAssets.response(.ok, ConsoleAssets.style, type: "text/css; charset=utf-8") }
        router.get("/api/snapshot") { _, _ in
            ConsoleAssets.response(.ok, snapshots.current.json, type: "application/json")
        }
        router.get("/events") { _, _ -> Response in
            let admitted = streams.withLock { count in
                guard count < configuration.maxStreams else { return false }
                count += 1
                return true
            }
            guard admitted else { return ConsoleAssets.response(.serviceUnavailable, "too many event streams", type: "text/plain") }
            return Response(
                status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-store"],
                body: ResponseBody { writer in
                    defer { streams.withLock { $0 -= 1 } }
                    var sent = -1
                    // Until the client goes (the write fails) or the server stops (the task is cancelled).
                    while !Task.isCancelled {
                        let snapshot = snapshots.current
                        if snapshot.version != sent {
                            sent = snapshot.version
                            // The document is one line (`Snapshot.json`): a line break would end the event early.
                            try await writer.write(ByteBuffer(string: "data: \(snapshot.json)\n\n"))
                        }
                        try await Task.sleep(for: .milliseconds(250))
                    }
                    try await writer.finish(nil)
                })
        }
        let admission = ConsoleAdmission(
            token: configuration.token,
            requestTimeout: configuration.requestTimeout,
            unauthenticatedLimit: configuration.unauthenticatedLimit)
        // The guard before the routes, so that it sees every request (HEAD, a path the console lacks) as sent.
        let routes = router.buildResponder()
        let guarded = ConsoleGuard<BasicRequestContext>(token: configuration.token)
        let responder = CallbackResponder<BasicRequestContext> { request, context in
            try await guarded.handle(request, context: context) { request, context in try await routes.respond(to: request, context: context) }
        }
        return Application(
            responder: responder,
            server: .http1(
                configuration: .init(
                    additionalChannelHandlers: [admission.handler()],
                    idleTimeout: .seconds(Int64(configuration.idleTimeout.components.seconds)))),
            configuration: ApplicationConfiguration(
                address: .hostname(configuration.host, port: configuration.port), serverName: "beaconflow-console",
                availableConnectionsDelegate: .maximum(configuration.maxConnections, logger: logger)),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? configuration.port) },
            logger: logger)
    }
}

/// Headers every answer carries, the token check, and no request bodies.
struct ConsoleGuard<Context: RequestContext>: RouterMiddleware {
    let token: String
    static var referrerPolicy: HTTPField.Name { HTTPField.Name("Referrer-Policy")! }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        let bodyLength = request.headers[.contentLength].flatMap { Int($0) } ?? 0
        if bodyLength > 0 || request.headers[.transferEncoding] != nil {
            response = ConsoleAssets.response(.contentTooLarge, "the console takes no request bodies", type: "text/plain")
        } else if request.method != HTTPRequest.Method.get, request.method != HTTPRequest.Method.head {
            response = ConsoleAssets.response(.methodNotAllowed, "the console is read-only", type: "text/plain")
        } else if request.uri.path == "/login" || authorized(request) {
            response = try await answer(request, context: context, next: next)
        } else if request.uri.path.hasPrefix("/api/") || request.uri.path == "/events" {
            response = ConsoleAssets.response(.unauthorized, "open the console's login link first", type: "text/plain")
        } else {
            response = ConsoleAssets.response(.unauthorized, ConsoleAssets.loginPage, type: "text/html; charset=utf-8")
        }
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[.contentSecurityPolicy] = "default-src 'self'; frame-ancestors 'none'"
        response.headers[Self.referrerPolicy] = "no-referrer"
        if response.headers[.cacheControl] == nil { response.headers[.cacheControl] = "no-store" }
        return response
    }

    /// The route's answer: HEAD as GET without the body (and without opening an event stream), a route that
    /// throws (404 for a path the console does not have) as a plain answer that gets the headers too.
    private func answer(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let head = request.method == .head
        if head, request.uri.path == "/events" { return Response(status: .ok, headers: [.contentType: "text/event-stream"]) }
        var asked = request.head
        if head { asked.method = .get }
        do {
            var response = try await next(Request(head: asked, body: request.body), context)
            if head { response.body = ResponseBody() }
            return response
        } catch let error as HTTPError {
            return ConsoleAssets.response(error.status, error.body ?? error.status.reasonPhrase, type: "text/plain")
        }
    }

    private func authorized(_ request: Request) -> Bool {
        if let cookie = request.cookies[ConsoleServer.cookieName]?.value, sameToken(cookie, token) { return true }
        if let header = request.headers[.authorization], header.hasPrefix("Bearer "), sameToken(String(header.dropFirst(7)), token) {
            return true
        }
        return false
    }
}

/// Whether `given` is the token, compared in time that does not depend on where they differ.
func sameToken(_ given: String, _ token: String) -> Bool {
    let a = Array(given.utf8)
    let b = Array(token.utf8)
    var difference = UInt8(a.count == b.count ? 0 : 1)
    for index in 0..<b.count { difference |= (index < a.count ? a[index] : 0) ^ b[index] }
    return difference == 0 && !b.isEmpty
}
