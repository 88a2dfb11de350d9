import CLibCrypto

/// The three primitives beaconflow needs from OpenSSL's libcrypto (the system's, kept current by its security
/// updates): one AES-128 block in the encryption direction, SHA-256 and HMAC-SHA256. With valid sizes they fail
/// only when memory runs out, which traps like any other allocation.
public enum LibCrypto {
    /// `block` (16 bytes) encrypted with the AES-128 `key` (16 bytes): ECB of a single block, no padding.
    public static func aes128Encrypt(block: [UInt8], key: [UInt8]) -> [UInt8] {
        precondition(key.count == 16 && block.count == 16, "AES-128 takes a 16-byte key and a 16-byte block")
        guard let context = EVP_CIPHER_CTX_new() else { fatalError("EVP_CIPHER_CTX_new: out of memory") }
        defer { EVP_CIPHER_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: 32)
        var written: Int32 = 0
        let done =
            EVP_EncryptInit_ex(context, EVP_aes_128_ecb(), nil, key, nil) == 1
            && EVP_CIPHER_CTX_set_padding(context, 0) == 1
            && EVP_EncryptUpdate(context, &out, &written, block, 16) == 1
        precondition(done && written == 16, "AES-128 of one block failed")
        return Array(out.prefix(16))
    }

    /// The SHA-256 digest (32 bytes) of `bytes`.
    public static func sha256(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let done = EVP_Digest(bytes.baseAddress, bytes.count, &digest, &length, EVP_sha256(), nil) == 1
        precondition(done && length == 32, "SHA-256 failed")
        return digest
    }

    /// The HMAC-SHA256 (32 bytes) of `message` under `key`.
    public static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var code = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let done = HMAC(EVP_sha256(), key, Int32(key.count), message, message.count, &code, &length) != nil
        precondition(done && length == 32, "HMAC-SHA256 failed")
        return code
    }
}
