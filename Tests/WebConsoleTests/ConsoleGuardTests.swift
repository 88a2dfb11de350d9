import Logging
import Testing
import TestServers
import WorkQueue
@testable import WebConsole

/// The console's guard and routes, served in process on a loopback port and asked over a plain socket (no
/// browser): the token by cookie or bearer, a read-only console without request bodies, the headers every answer
/// carries, and the bound on event streams. What only a browser shows stays with `ConsoleBrowserTests`.
@Suite(.timeLimit(.minutes(1))) struct ConsoleGuardTests {
    static let token = "console-test-token"
    static let bearer = ["Authorization: Bearer \(token)"]

    /// One request, on a thread of its own: the console answers from the cooperative pool, which a blocking read
    /// must not hold.
    func ask(port: Int, method: String = "GET", path: String, headers: [String] = [], body: String? = nil) async throws
        -> LoopbackHTTPResponse
    {
        try await onThread { try httpRequest(port: port, method: method, path: path, headers: headers, body: body) }
    }

    /// Runs `body` with the port of a console that serves until it returns.
    func withConsole(maxStreams: Int = 32, _ body: @Sendable (Int) async throws -> Void) async throws {
        var configuration = ConsoleServer.Configuration(token: Self.token)
        configuration.port = 0
        configuration.maxStreams = maxStreams
        let logger = Logger(label: "console-test")
        // Never started: the document stays the one before the first read.
        let snapshots = ConsoleSnapshots(conninfo: "", refresh: .seconds(60), logger: logger)
        let (ports, listening) = AsyncStream<Int>.makeStream()
        let application = ConsoleServer.application(snapshots: snapshots, configuration: configuration, logger: logger) { port in
            listening.yield(port)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await application.runService() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            try await body(port)
            group.cancelAll()
        }
    }

    @Test func withoutTheTokenPagesShowTheLoginAndTheAPIRefuses() async throws {
        try await withConsole { port in
            let page = try await ask(port: port, path: "/beacons")
            #expect(page.status == 401)
            #expect(page.body.contains("login"))
            let api = try await ask(port: port, path: "/api/snapshot")
            #expect(api.status == 401)
            #expect(api.body == "open the console's login link first")
            let wrong = try await ask(port: port, path: "/api/snapshot", headers: ["Authorization: Bearer nope"])
            #expect(wrong.status == 401)
        }
    }

    @Test func theLoginLinkSetsACookieThatOpensThePages() async throws {
        try await withConsole { port in
            let refused = try await ask(port: port, path: "/login?token=nope")
            #expect(refused.status == 401)
            let login = try await ask(port: port, path: "/login?token=\(Self.token)&next=/agents")
            #expect(login.status == 303)
            #expect(login.header("Location") == "/agents")
            let cookie = try #require(login.header("Set-Cookie"))
            #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "\(cookie)")
            // A next page the console does not have goes to the sites page.
            let elsewhere = try await ask(port: port, path: "/login?token=\(Self.token)&next=https://example.com/")
            #expect(elsewhere.header("Location") == "/")
            let value = try #require(cookie.split(separator: ";").first.map(String.init))
            let page = try await ask(port: port, path: "/agents", headers: ["Cookie: \(value)"])
            #expect(page.status == 200)
            let document = try await ask(port: port, path: "/api/snapshot", headers: ["Cookie: \(value)"])
            #expect(document.body == #"{"error": "not read yet"}"#)
        }
    }

    @Test func theConsoleIsReadOnlyAndTakesNoBodies() async throws {
        try await withConsole { port in
            let post = try await ask(port: port, method: "POST", path: "/api/snapshot", headers: Self.bearer + ["Content-Length: 0"])
            #expect(post.status == 405)
            let body = try await ask(port: port, path: "/", headers: Self.bearer + ["Content-Length: 5"], body: "hello")
            #expect(body.status == 413)
            let head = try await ask(port: port, method: "HEAD", path: "/", headers: Self.bearer)
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
        }
    }

    @Test func everyAnswerCarriesTheSecurityHeaders() async throws {
        try await withConsole { port in
            for (path, headers) in [("/", Self.bearer), ("/", []), ("/console.js", Self.bearer), ("/nosuch", Self.bearer)] {
                let response = try await ask(port: port, path: path, headers: headers)
                #expect(response.status == (path == "/nosuch" ? 404 : headers.isEmpty ? 401 : 200), "\(path)")
                #expect(response.header("X-Content-Type-Options") == "nosniff", "\(path)")
                #expect(response.header("Content-Security-Policy") == "default-src 'self'; frame-ancestors 'none'", "\(path)")
                #expect(response.header("Referrer-Policy") == "no-referrer", "\(path)")
                #expect(response.header("Cache-Control") == "no-store", "\(path)")
            }
        }
    }

    /// Past `maxStreams` an event stream is refused at once (the page then polls).
    @Test func eventStreamsPastTheBoundAreRefused() async throws {
        try await withConsole(maxStreams: 0) { port in
            let refused = try await ask(port: port, path: "/events", headers: Self.bearer)
            #expect(refused.status == 503)
            #expect(refused.body == "too many event streams")
        }
    }

    @Test func tokensAreComparedWhole() {
        #expect(sameToken("abc", "abc"))
        #expect(!sameToken("abd", "abc"))
        #expect(!sameToken("ab", "abc"))
        #expect(!sameToken("abcd", "abc"))
        #expect(!sameToken("", ""))
    }
}
