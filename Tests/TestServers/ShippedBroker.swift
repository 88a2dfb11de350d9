import Foundation
import LocalServers

/// The repository's deploy/ directory.
public let deployDirectory = repositoryRoot + "/deploy"

/// mosquitto as deploy/ configures it (TLS, passwords, the ACL), with the certificates and passwords of
/// deploy/make-certificates for 127.0.0.1 in `directory`/pki, on a free loopback port. `users` are the agents'
/// `<site>/<agent>` user names; `ingest` is always made.
public func startShippedBroker(in directory: String, users: [String]) async throws -> (broker: MosquittoServer, port: Int) {
    let pki = directory + "/pki"
    let made = try await runProgram(deployDirectory + "/make-certificates", [pki, "127.0.0.1"] + users)
    guard made.status == 0 else { throw LocalServerError("make-certificates failed: \(made.output)\(made.errors)") }
    // The broker drops to the user mosquitto, which must read the key and the password file.
    for file in ["broker.key", "passwd"] {
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: pki + "/" + file)
    }
    try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: pki)
    try FileManager.default.copyItem(atPath: deployDirectory + "/mosquitto/acl", toPath: pki + "/acl")
    let port = try freeLoopbackPort()
    var configuration = try String(contentsOfFile: deployDirectory + "/mosquitto/beaconflow.conf", encoding: .utf8)
        .replacingOccurrences(of: "/etc/mosquitto/beaconflow", with: pki)
        .replacingOccurrences(of: "listener 8883", with: "listener \(port) 127.0.0.1")
    // The test broker's own lines set these: where it keeps its files.
    configuration = configuration.split(separator: "\n", omittingEmptySubsequences: false)
        .filter { line in !["per_listener_settings", "persistence_location", "log_dest"].contains { line.hasPrefix($0) } }
        .joined(separator: "\n")
    return (try MosquittoServer(configuration: configuration, port: port), port)
}

/// The password make-certificates wrote for `user`.
public func shippedPassword(in directory: String, user: String) throws -> String {
    try String(contentsOfFile: directory + "/pki/secrets/\(user).pw", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
}
