import LibPQ
import LocalServers
import TestServers
import Testing

/// Parameters go to the server in binary with their types, and rows come back typed: checked against a real
/// server, which reads each value back as text.
@Suite(.enabled(if: PostgresServer.binaries != nil, "PostgreSQL is not installed"), .timeLimit(.minutes(5)))
struct PostgresValueTests {
    @Test func parametersReachTheServerAsTheirTypes() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        let row = try #require(
            try connection.query(
                """
                SELECT pg_typeof($1)::text, $1, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text,
                       $8::text, $9::text, $10::text, $11::text, $12::text, $13::text, $14::text, $15::text
                """,
                [
                    "quote \" back\\slash ,{}", Int16(-2), Int32.min, Int64.max, true, Float(0.5), Double(-1.25),
                    PostgresTimestamp(unixMicros: 1_767_225_599_999_999), PostgresTimestamp.distantPast,
                    PostgresDate(unixDay: -1), PostgresBytes([0, 0xFF, 0x5C]), ["a", nil, "c\"d"], [Int64](),
                    [Float.nan, 1], String?.none,
                ]
            ).first)
        #expect(
            row.values == [
                "text", "quote \" back\\slash ,{}", "-2", "-2147483648", "9223372036854775807", "true", "0.5", "-1.25",
                "2025-12-31 23:59:59.999999+00", "-infinity", "1969-12-31", "\\x00ff5c", #"{a,NULL,"c\"d"}"#, "{}",
                "{NULL,1}", nil,
            ])
    }

    @Test func rowsDecodeTypedAndNameTheColumnThatDoesNot() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        let row = try #require(
            try connection.query(
                "SELECT 42::bigint AS n, NULL::text AS missing, 'x' AS word, true AS flag, '\\x0102'::bytea AS bytes"
            ).first)
        #expect(try row.decode(0, as: Int64.self) == 42)
        #expect(try row.decode(1, as: String?.self) == nil)
        #expect(try row.decode(3, as: Bool.self))
        #expect(try row.decode(4, as: PostgresBytes.self) == PostgresBytes([1, 2]))
        let null = #expect(throws: PostgresError.self) { try row.decode(1, as: String.self) }
        #expect(null?.message == "column 2 (missing) is NULL, where a String was expected")
        let wrong = #expect(throws: PostgresError.self) { try row.decode(2, as: Int.self) }
        #expect(wrong?.message == "column 3 (word) holds no Int: x")
        let past = #expect(throws: PostgresError.self) { try row.decode(5, as: Int.self) }
        #expect(past?.message == "the result has 5 columns, not 6")
    }

    @Test func aCopyTableSendsItsColumnsInOrder() async throws {
        struct Reading {
            var name: String
            var value: Double?
        }
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try connection.execute("CREATE TABLE readings (value double precision, name text NOT NULL)")
        let table = CopyTable<Reading>("readings", [.init("name") { $0.name }, .init("value") { $0.value }])
        #expect(table.statement == "COPY readings (name, value) FROM STDIN (FORMAT binary)")
        try connection.copy(
            [Reading(name: "a", value: 1.5), Reading(name: "b", value: nil), Reading(name: "c", value: .infinity)],
            into: table)
        #expect(try connection.query("SELECT name, value FROM readings ORDER BY 1").map(\.values) == [["a", "1.5"], ["b", nil], ["c", nil]])
    }
}
