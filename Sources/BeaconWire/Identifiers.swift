/// Site, zone and agent ids (the sites file's contract): 1-64 characters of a-z, 0-9 and '-'. They are MQTT topic levels and SQL
/// keys, so nothing else is allowed in them.
public func isValidIdentifier(_ text: String) -> Bool {
    !text.isEmpty && text.utf8.count <= 64
        && text.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
}

/// The id a name gives (docs/recordings.md): a name that is an id in lower case is that id; any other is lowercased
/// and each run of characters other than a-z and 0-9 becomes one '-', none left at either end (`Living_Room` is
/// `living-room`, `AA:BB:CC:DD:EE:FF` is `aa-bb-cc-dd-ee-ff`). Nil where no letter or digit is left or the id
/// would be longer than 64.
public func identifier(fromName name: some StringProtocol) -> String? {
    let lowered = name.lowercased()
    if isValidIdentifier(lowered) { return lowered }
    var id = ""
    var separated = false
    for scalar in lowered.unicodeScalars {
        if ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar) {
            if separated, !id.isEmpty { id.append("-") }
            id.unicodeScalars.append(scalar)
            separated = false
        } else {
            separated = true
        }
    }
    return isValidIdentifier(id) ? id : nil
}
