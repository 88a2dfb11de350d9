import LibCrypto

/// AES-128 in the encryption direction, the only primitive the beacon formats need: EAX (Eddystone eTLM) and CCM
/// (BTHome) use the forward cipher for both encryption and decryption, and the EID computation is two single blocks.
struct AES128 {
    let key: [UInt8]

    init(key: [UInt8]) {
        precondition(key.count == 16, "AES-128 keys are 16 bytes")
        self.key = key
    }

    func encrypt(_ block: [UInt8]) -> [UInt8] { LibCrypto.aes128Encrypt(block: block, key: key) }
}

private func xor(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
    var out = a
    for i in 0..<min(a.count, b.count) { out[i] ^= b[i] }
    return out
}

/// Doubling in GF(2^128), as CMAC uses it for its subkeys (NIST SP 800-38B §6.1).
private func gfDouble(_ block: [UInt8]) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 16)
    var carry: UInt8 = 0
    for i in stride(from: 15, through: 0, by: -1) {
        out[i] = block[i] << 1 | carry
        carry = block[i] >> 7
    }
    if block[0] & 0x80 != 0 { out[15] ^= 0x87 }
    return out
}

/// Big-endian counter increment of a 16-byte block.
private func increment(_ block: inout [UInt8]) {
    for i in stride(from: 15, through: 0, by: -1) {
        block[i] &+= 1
        if block[i] != 0 { return }
    }
}

private func ctr(_ cipher: AES128, initialCounter: [UInt8], _ input: [UInt8]) -> [UInt8] {
    var counter = initialCounter
    var out = [UInt8]()
    out.reserveCapacity(input.count)
    var position = 0
    while position < input.count {
        let keystream = cipher.encrypt(counter)
        for i in 0..<min(16, input.count - position) {
            out.append(input[position + i] ^ keystream[i])
        }
        position += 16
        increment(&counter)
    }
    return out
}

/// AES-CMAC (NIST SP 800-38B), also called OMAC1.
func cmac(_ cipher: AES128, _ message: [UInt8]) -> [UInt8] {
    let k1 = gfDouble(cipher.encrypt([UInt8](repeating: 0, count: 16)))
    let k2 = gfDouble(k1)
    let blockCount = max(1, (message.count + 15) / 16)
    let lastComplete = !message.isEmpty && message.count % 16 == 0
    var state = [UInt8](repeating: 0, count: 16)
    for index in 0..<(blockCount - 1) {
        state = cipher.encrypt(xor(state, Array(message[(index * 16)..<(index * 16 + 16)])))
    }
    var last = Array(message[((blockCount - 1) * 16)...])
    if lastComplete {
        last = xor(last, k1)
    } else {
        last.append(0x80)
        last += [UInt8](repeating: 0, count: 16 - last.count)
        last = xor(last, k2)
    }
    return cipher.encrypt(xor(state, last))
}

/// AES-EAX (Bellare, Rogaway, Wagner, "The EAX Mode of Operation", 2004), with a tag truncated to `tagLength`.
enum EAX {
    private static func omac(_ cipher: AES128, tweak: UInt8, _ message: [UInt8]) -> [UInt8] {
        var prefixed = [UInt8](repeating: 0, count: 16)
        prefixed[15] = tweak
        return cmac(cipher, prefixed + message)
    }

    static func seal(
        key: [UInt8], nonce: [UInt8], header: [UInt8] = [], plaintext: [UInt8], tagLength: Int
    ) -> (ciphertext: [UInt8], tag: [UInt8]) {
        let cipher = AES128(key: key)
        let n = omac(cipher, tweak: 0, nonce)
        let h = omac(cipher, tweak: 1, header)
        let ciphertext = ctr(cipher, initialCounter: n, plaintext)
        let c = omac(cipher, tweak: 2, ciphertext)
        return (ciphertext, Array(xor(xor(n, c), h).prefix(tagLength)))
    }

    /// Returns the plaintext, or nil when the tag does not match.
    static func open(
        key: [UInt8], nonce: [UInt8], header: [UInt8] = [], ciphertext: [UInt8], tag: [UInt8]
    ) -> [UInt8]? {
        let cipher = AES128(key: key)
        let n = omac(cipher, tweak: 0, nonce)
        let h = omac(cipher, tweak: 1, header)
        let c = omac(cipher, tweak: 2, ciphertext)
        let expected = Array(xor(xor(n, c), h).prefix(tag.count))
        guard constantTimeEqual(expected, tag) else { return nil }
        return ctr(cipher, initialCounter: n, ciphertext)
    }
}

/// AES-CCM (RFC 3610, NIST SP 800-38C) without associated data, for nonces of 7 to 13 bytes.
enum CCM {
    private static func blocks(nonce: [UInt8], tagLength: Int, length: Int) -> (b0: [UInt8], a0: [UInt8]) {
        let l = 15 - nonce.count
        var b0 = [UInt8(((tagLength - 2) / 2) << 3 | (l - 1))] + nonce
        var a0 = [UInt8(l - 1)] + nonce
        for i in stride(from: l - 1, through: 0, by: -1) {
            b0.append(UInt8(truncatingIfNeeded: length >> (8 * i)))
            a0.append(0)
        }
        return (b0, a0)
    }

    private static func mac(_ cipher: AES128, b0: [UInt8], _ message: [UInt8]) -> [UInt8] {
        var x = cipher.encrypt(b0)
        var position = 0
        while position < message.count {
            var block = Array(message[position..<min(position + 16, message.count)])
            block += [UInt8](repeating: 0, count: 16 - block.count)
            x = cipher.encrypt(xor(x, block))
            position += 16
        }
        return x
    }

    static func seal(key: [UInt8], nonce: [UInt8], plaintext: [UInt8], tagLength: Int) -> (ciphertext: [UInt8], tag: [UInt8]) {
        let cipher = AES128(key: key)
        let (b0, a0) = blocks(nonce: nonce, tagLength: tagLength, length: plaintext.count)
        let t = mac(cipher, b0: b0, plaintext)
        var a1 = a0
        increment(&a1)
        let ciphertext = ctr(cipher, initialCounter: a1, plaintext)
        let tag = Array(xor(t, cipher.encrypt(a0)).prefix(tagLength))
        return (ciphertext, tag)
    }

    /// Returns the plaintext, or nil when the tag does not match.
    static func open(key: [UInt8], nonce: [UInt8], ciphertext: [UInt8], tag: [UInt8]) -> [UInt8]? {
        let cipher = AES128(key: key)
        let (b0, a0) = blocks(nonce: nonce, tagLength: tag.count, length: ciphertext.count)
        var a1 = a0
        increment(&a1)
        let plaintext = ctr(cipher, initialCounter: a1, ciphertext)
        let expected = Array(xor(mac(cipher, b0: b0, plaintext), cipher.encrypt(a0)).prefix(tag.count))
        return constantTimeEqual(expected, tag) ? plaintext : nil
    }
}

private func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for i in 0..<a.count { difference |= a[i] ^ b[i] }
    return difference == 0
}
