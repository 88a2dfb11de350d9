import Foundation
import LocalServers

/// A CA and a server certificate for 127.0.0.1, made with openssl; readable by the broker's user.
public func makeTestPKI(openssl: String, in directory: String) throws {
    func run(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: openssl)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw LocalServerError("openssl \(arguments.first ?? "") failed") }
    }
    try run(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=beaconflow test CA"])
    try run(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=127.0.0.1"])
    try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(
        toFile: directory + "/san.ext", atomically: true, encoding: .utf8)
    try run(["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.pem", "-days", "2", "-extfile", "san.ext"])
    for file in try FileManager.default.contentsOfDirectory(atPath: directory) {
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: directory + "/" + file)
    }
}
