/// Site, zone and agent ids (the sites file's contract): 1-64 characters of a-z, 0-9 and '-'. They are MQTT topic levels and SQL
/// keys, so nothing else is allowed in them.
public func isValidIdentifier(_ text: String) -> Bool {
    !text.isEmpty && text.utf8.count <= 64
        && text.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
}
