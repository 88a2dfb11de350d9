#if canImport(Glibc)
import Glibc
#endif
import CLibPQ

/// A PostgreSQL failure: what was being done, the SQLSTATE when the server gave one, and libpq's primary message.
/// Connection strings (which may hold a password) never appear in it.
public struct PostgresError: Error, Sendable, Hashable, CustomStringConvertible {
    public var operation: String
    /// Five characters, e.g. `23505` unique violation, `08006` connection failure; nil for client-side errors.
    public var sqlState: String?
    public var message: String

    public init(_ operation: String, sqlState: String? = nil, _ message: String) {
        self.operation = operation
        self.sqlState = sqlState
        self.message = message
    }

    public var description: String {
        "PostgreSQL \(operation) failed" + (sqlState.map { " (SQLSTATE \($0))" } ?? "") + ": \(message)"
    }

    /// The connection is gone or the server cannot serve now: class 08, an administrator's or a crash shutdown
    /// (57P01-57P03), insufficient resources (class 53), a server that no longer takes writes (25006: a primary
    /// turned standby or read-only; a new connection with `target_session_attrs=read-write` finds the writable
    /// one), or libpq lost the connection (no SQLSTATE). Reconnect and retry. Any other error is about the statement
    /// and its data: retrying the same statement fails the same way.
    public var isConnectionFailure: Bool {
        guard let sqlState else { return true }
        return sqlState.hasPrefix("08") || sqlState.hasPrefix("53")
            || ["57P01", "57P02", "57P03", "25006"].contains(sqlState)
    }

    /// The statement's data is what the server refused: a data exception (class 22, such as text with a NUL) or an
    /// integrity constraint violation (class 23). Any other refusal (a lock not granted, a limit, a privilege, a
    /// timeout, a serialization failure) is about the server's state, and the same data may go in later.
    public var isAboutTheData: Bool {
        guard let sqlState else { return false }
        return sqlState.hasPrefix("22") || sqlState.hasPrefix("23")
    }
}

/// One libpq connection. Blocking calls: it belongs to one thread at a time, never Swift's cooperative pool.
public final class PostgresConnection {
    private let connection: OpaquePointer

    /// Connects with a libpq conninfo string or `postgresql://` URI; `PG*` environment variables apply as in psql.
    public init(_ conninfo: String) throws(PostgresError) {
        // Checked first: libpq's own message for a syntax error would quote the string, password and all.
        if let problem = Self.syntaxError(in: conninfo) { throw PostgresError("parse the connection string", problem) }
        guard let connection = PQconnectdb(conninfo) else {
            throw PostgresError("connect", "libpq could not allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.trimmed(PQerrorMessage(connection))
            PQfinish(connection)
            throw PostgresError("connect", sqlState: "08001", message)
        }
        // Server notices ("already exists, skipping") are not errors; libpq would print them on stderr.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        self.connection = connection
    }

    deinit { PQfinish(connection) }

    /// Why a conninfo string or URI cannot be parsed, or nil when it can. libpq's message quotes the offending
    /// part, which may be a password: quoted text is left out.
    public static func syntaxError(in conninfo: String) -> String? {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &error) else {
            let message = error.map { String(cString: $0) } ?? "the connection string cannot be parsed"
            if let error { PQfreemem(error) }
            return withoutQuotedText(trimmed(message))
        }
        PQconninfoFree(options)
        return nil
    }

    /// `message` with every "quoted" part longer than two characters replaced by "…" (a quoted "=" stays).
    static func withoutQuotedText(_ message: String) -> String {
        var result = ""
        var quoted: String?
        for character in message {
            if character == "\"" {
                if let text = quoted {
                    result += "\"" + (text.count <= 2 ? text : "…") + "\""
                    quoted = nil
                } else {
                    quoted = ""
                }
            } else if quoted != nil {
                quoted?.append(character)
            } else {
                result.append(character)
            }
        }
        if quoted != nil { result += "\"…" }
        return result
    }

    /// Runs one or more statements without parameters (migrations, transaction control).
    public func execute(_ sql: String) throws(PostgresError) {
        let result = PQexec(connection, sql)
        defer { PQclear(result) }
        try check(result, "execute")
    }

    /// Runs a statement with parameters ($1, $2, ...), each sent in binary with its type, and returns its rows.
    @discardableResult
    public func query(_ sql: String, _ parameters: [any PostgresBindable] = []) throws(PostgresError) -> [PostgresRow] {
        let binds = parameters.map(\.postgresBind)
        let types = binds.map { Oid($0.type) }
        let lengths = binds.map { Int32($0.bytes?.count ?? 0) }
        let formats = [Int32](repeating: 1, count: binds.count)
        let values: [UnsafeMutablePointer<CChar>?] = binds.map { bind in
            guard let bytes = bind.bytes else { return nil }
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: max(bytes.count, 1))
            bytes.withUnsafeBytes { raw in
                UnsafeMutableRawPointer(copy).copyMemory(from: raw.baseAddress ?? UnsafeRawPointer(copy), byteCount: raw.count)
            }
            return copy
        }
        defer { values.forEach { $0?.deallocate() } }
        let result = values.map { UnsafePointer($0) }.withUnsafeBufferPointer { pointers in
            PQexecParams(
                connection, sql, Int32(binds.count), types, pointers.baseAddress, lengths, formats, 0)
        }
        defer { PQclear(result) }
        try check(result, "query")
        let columns = (0..<PQnfields(result)).map { String(cString: PQfname(result, $0)) }
        var rows: [PostgresRow] = []
        for row in 0..<PQntuples(result) {
            let values = (0..<Int32(columns.count)).map { column in
                PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
            }
            rows.append(PostgresRow(values: values, columns: columns))
        }
        return rows
    }

    /// Sends rows with `COPY ... FROM STDIN (FORMAT binary)`; `data` is the whole binary COPY stream.
    public func copy(_ statement: String, data: [UInt8]) throws(PostgresError) {
        let start = PQexec(connection, statement)
        let status = PQresultStatus(start)
        PQclear(start)
        guard status == PGRES_COPY_IN else { throw lastError("copy") }
        let sent = data.withUnsafeBytes { raw in
            raw.withMemoryRebound(to: CChar.self) { PQputCopyData(connection, $0.baseAddress, Int32($0.count)) }
        }
        guard sent == 1, PQputCopyEnd(connection, nil) == 1 else { throw lastError("copy") }
        // A bad row shows only here, in the result after the end of the stream.
        var failure: PostgresError?
        while let result = PQgetResult(connection) {
            if PQresultStatus(result) != PGRES_COMMAND_OK, failure == nil { failure = error(of: result, "copy") }
            PQclear(result)
        }
        if let failure { throw failure }
    }

    public var isConnected: Bool { PQstatus(connection) == CONNECTION_OK }

    private func check(_ result: OpaquePointer?, _ operation: String) throws(PostgresError) {
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            throw result.map { error(of: $0, operation) } ?? lastError(operation)
        }
    }

    private func error(of result: OpaquePointer, _ operation: String) -> PostgresError {
        let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
        let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
        return PostgresError(operation, sqlState: state, primary.map(Self.oneLine) ?? Self.trimmed(PQerrorMessage(connection)))
    }

    private func lastError(_ operation: String) -> PostgresError {
        PostgresError(operation, sqlState: PQstatus(connection) == CONNECTION_OK ? nil : "08006",
            Self.trimmed(PQerrorMessage(connection)))
    }

    /// libpq's message on one line (it may span several: a connection attempt per address, a hint): its lines,
    /// trimmed, joined by "; ", so that a log line stays one line.
    static func trimmed(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "unknown error" }
        return oneLine(String(cString: message))
    }

    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline)
            .map { line in line.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed() }
            .filter { !$0.isEmpty }.map { String($0) }.joined(separator: "; ")
    }
}
