import Foundation
import Mosquitto

/// A configuration mistake, said so that the user can fix it.
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A broker address from `mqtt://[user[:password]@]host[:port]` or `mqtts://...` (TLS, port 8883 by default).
public struct BrokerAddress: Sendable, Hashable {
    public var host: String
    public var port: Int
    public var useTLS: Bool
    public var username: String?
    public var password: String?

    public init(host: String, port: Int, useTLS: Bool = false, username: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.useTLS = useTLS
        self.username = username
        self.password = password
    }

    /// Parses a broker URL; the error names what is wrong without repeating a password.
    public init(url text: String) throws(ConfigurationError) {
        guard let components = URLComponents(string: text), let scheme = components.scheme else {
            throw ConfigurationError("broker URL is not a URL; expected mqtt://host:port or mqtts://host:port")
        }
        switch scheme {
        case "mqtt": useTLS = false
        case "mqtts": useTLS = true
        default: throw ConfigurationError("broker URL scheme '\(scheme)' is not mqtt or mqtts")
        }
        guard let host = components.host, !host.isEmpty else {
            throw ConfigurationError("broker URL has no host")
        }
        self.host = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        port = components.port ?? (useTLS ? 8883 : 1883)
        guard (1...65535).contains(port) else { throw ConfigurationError("broker port \(port) is out of range") }
        username = components.user?.removingPercentEncoding
        password = components.password?.removingPercentEncoding
    }

    /// Takes the password from the first line of a file (which keeps it out of the process list). An empty first
    /// line is no password (a packaged unit's default where no password file is installed: an anonymous broker or
    /// the URL's own login); returns whether there was one.
    @discardableResult
    public mutating func readPassword(file path: String) throws(ConfigurationError) -> Bool {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            throw ConfigurationError(
                "cannot read the password file \(path): \(String(cString: strerror(code))) (errno \(code))")
        }
        close(descriptor)
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ConfigurationError("the password file \(path) is not UTF-8 text")
        }
        let line = text.split(separator: "\n", omittingEmptySubsequences: false).first ?? ""
        guard !line.isEmpty else { return false }
        password = String(line)
        return true
    }

    /// The URL without the password, for logs and messages.
    public var redacted: String {
        let user = username.map { "\($0)@" } ?? ""
        return "\(useTLS ? "mqtts" : "mqtt")://\(user)\(host):\(port)"
    }

    /// TLS settings for this address: none for `mqtt://` (where CA, certificate or key files are a mistake),
    /// the system's CAs or the files given for `mqtts://`.
    public func tls(caFile: String?, certificateFile: String?, keyFile: String?) throws(ConfigurationError) -> MQTTClient.TLS? {
        guard useTLS else {
            if caFile != nil || certificateFile != nil || keyFile != nil {
                throw ConfigurationError("a CA, certificate or key file needs an mqtts:// broker")
            }
            return nil
        }
        return MQTTClient.TLS(caFile: caFile, certificateFile: certificateFile, keyFile: keyFile)
    }

    /// The MQTT client's settings for this address: host, port, user name and password, and TLS.
    public func clientConfiguration(clientID: String, tls: MQTTClient.TLS?) -> MQTTClient.Configuration {
        var configuration = MQTTClient.Configuration(host: host, port: port, clientID: clientID)
        configuration.username = username
        configuration.password = password
        configuration.tls = tls
        return configuration
    }

    public var endpoint: MQTTClient.Endpoint { MQTTClient.Endpoint(host: host, port: port) }

    /// Checks that several brokers can serve as one deployment's: one client (the agent's, failing over) or one
    /// set of connections (the ingest's) uses the same TLS and credentials for all of them, and no broker is
    /// named twice: not by the same host, nor by two names that `resolve` maps to a shared address and port (two
    /// connections under one client id to one broker would take each other's place forever).
    public static func checkDeployment(
        _ brokers: [BrokerAddress], resolve: (String) -> [String] = resolvedAddresses(of:)
    ) throws(ConfigurationError) {
        guard let first = brokers.first else { throw ConfigurationError("no broker given") }
        for other in brokers.dropFirst() {
            guard other.useTLS == first.useTLS else {
                throw ConfigurationError("the brokers mix mqtt:// and mqtts://; give them all the same scheme")
            }
            guard other.username == first.username, other.password == first.password else {
                throw ConfigurationError("the brokers' URLs name different users or passwords; give them all the same")
            }
        }
        guard Set(brokers.map(\.endpoint)).count == brokers.count else {
            throw ConfigurationError("a broker is given twice")
        }
        guard brokers.count > 1 else { return }
        var seen: [String: BrokerAddress] = [:]
        for broker in brokers {
            for address in Set(resolve(broker.host).map(withoutIPv4Mapping)) {
                let key = "\(address) port \(broker.port)"
                if let earlier = seen[key], earlier.host != broker.host {
                    throw ConfigurationError(
                        "\(earlier.redacted) and \(broker.redacted) are one broker (both reach \(key)): give it once")
                }
                seen[key] = broker
            }
        }
    }

    /// An IPv4-mapped IPv6 address (`::ffff:127.0.0.1`, as getnameinfo writes every spelling of one) as the IPv4
    /// address it reaches; any other address as it is.
    static func withoutIPv4Mapping(_ address: String) -> String {
        let prefix = "::ffff:"
        guard address.lowercased().hasPrefix(prefix), address.dropFirst(prefix.count).contains(".") else { return address }
        return String(address.dropFirst(prefix.count))
    }

    /// The addresses a host name stands for now, as text (none when it does not resolve: such a broker is
    /// compared by name only, and its client retries until it resolves).
    public static func resolvedAddresses(of host: String) -> [String] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(first) }
        var addresses: [String] = []
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry {
            var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(current.pointee.ai_addr, current.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 {
                addresses.append(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
            entry = current.pointee.ai_next
        }
        return addresses
    }
}
