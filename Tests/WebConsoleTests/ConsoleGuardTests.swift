import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Testing
@testable import WebConsole

/// The console's guard and routes in process, through Hummingbird's test client (no socket, no browser): the
/// token by cookie or bearer, a read-only console without request bodies, the headers every answer carries, and
/// the bound on event streams. What only a browser shows stays with `ConsoleBrowserTests`.
@Suite struct ConsoleGuardTests {
    static let token = "console-test-token"

    func application(maxStreams: Int = 32) -> some ApplicationProtocol {
        var configuration = ConsoleServer.Configuration(token: Self.token)
        configuration.maxStreams = maxStreams
        let logger = Logger(label: "console-test")
        // Never started: the document stays the one before the first read.
        let snapshots = ConsoleSnapshots(conninfo: "", refresh: .seconds(60), logger: logger)
        return ConsoleServer.application(snapshots: snapshots, configuration: configuration, logger: logger)
    }

    static let bearer: HTTPFields = [.authorization: "Bearer \(token)"]

    @Test func withoutTheTokenPagesShowTheLoginAndTheAPIRefuses() async throws {
        try await application().test(.router) { client in
            let page = try await client.execute(uri: "/beacons", method: .get)
            #expect(page.status == .unauthorized)
            #expect(String(buffer: page.body).contains("login"))
            let api = try await client.execute(uri: "/api/snapshot", method: .get)
            #expect(api.status == .unauthorized)
            #expect(String(buffer: api.body) == "open the console's login link first")
            let wrong = try await client.execute(uri: "/api/snapshot", method: .get, headers: [.authorization: "Bearer nope"])
            #expect(wrong.status == .unauthorized)
        }
    }

    @Test func theLoginLinkSetsACookieThatOpensThePages() async throws {
        try await application().test(.router) { client in
            let refused = try await client.execute(uri: "/login?token=nope", method: .get)
            #expect(refused.status == .unauthorized)
            let login = try await client.execute(uri: "/login?token=\(Self.token)&next=/agents", method: .get)
            #expect(login.status == .seeOther)
            #expect(login.headers[.location] == "/agents")
            let cookie = try #require(login.headers[.setCookie])
            #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "\(cookie)")
            // A next page the console does not have goes to the sites page.
            let elsewhere = try await client.execute(uri: "/login?token=\(Self.token)&next=https://example.com/", method: .get)
            #expect(elsewhere.headers[.location] == "/")
            let value = try #require(cookie.split(separator: ";").first.map(String.init))
            let page = try await client.execute(uri: "/agents", method: .get, headers: [.cookie: value])
            #expect(page.status == .ok)
            let document = try await client.execute(uri: "/api/snapshot", method: .get, headers: [.cookie: value])
            #expect(String(buffer: document.body) == #"{"error": "not read yet"}"#)
        }
    }

    @Test func theConsoleIsReadOnlyAndTakesNoBodies() async throws {
        try await application().test(.router) { client in
            let post = try await client.execute(uri: "/api/snapshot", method: .post, headers: Self.bearer)
            #expect(post.status == .methodNotAllowed)
            var withBody = Self.bearer
            withBody[.contentLength] = "5"
            let body = try await client.execute(uri: "/", method: .get, headers: withBody, body: ByteBuffer(string: "hello"))
            #expect(body.status == .contentTooLarge)
            let head = try await client.execute(uri: "/", method: .head, headers: Self.bearer)
            #expect(head.status == .ok)
        }
    }

    @Test func everyAnswerCarriesTheSecurityHeaders() async throws {
        try await application().test(.router) { client in
            for (uri, headers) in [("/", Self.bearer), ("/", [:]), ("/console.js", Self.bearer), ("/nosuch", Self.bearer)] {
                let response = try await client.execute(uri: uri, method: .get, headers: headers)
                #expect(response.headers[.xContentTypeOptions] == "nosniff", "\(uri)")
                #expect(response.headers[.contentSecurityPolicy] == "default-src 'self'; frame-ancestors 'none'", "\(uri)")
                #expect(response.headers[HTTPField.Name("Referrer-Policy")!] == "no-referrer", "\(uri)")
                #expect(response.headers[.cacheControl] == "no-store", "\(uri)")
            }
        }
    }

    /// Past `maxStreams` an event stream is refused at once (the page then polls).
    @Test func eventStreamsPastTheBoundAreRefused() async throws {
        try await application(maxStreams: 0).test(.router) { client in
            let refused = try await client.execute(uri: "/events", method: .get, headers: Self.bearer)
            #expect(refused.status == .serviceUnavailable)
            #expect(String(buffer: refused.body) == "too many event streams")
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
