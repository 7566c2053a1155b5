import COpenSSL
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An OpenSSL private key (`EVP_PKEY *`), freed when the last reference goes. The pointer is never mutated after
/// creation, so a key can be shared between threads.
package final class PrivateKey: @unchecked Sendable {
    /// The kinds of key the authority makes.
    package enum Algorithm: Equatable, Sendable {
        /// ECDSA on NIST P-256 (prime256v1): every catalogue key but `weak-key`.
        case p256
        /// RSA with a modulus of this many bits.
        case rsa(bits: UInt32)
    }

    /// The `EVP_PKEY *`, owned by this object.
    package let pointer: OpaquePointer

    /// Takes ownership of `pointer`.
    package init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit { EVP_PKEY_free(pointer) }

    /// A fresh key of `algorithm`.
    package static func generate(_ algorithm: Algorithm) throws(TLSSetupError) -> PrivateKey {
        let generated: OpaquePointer?
        switch algorithm {
        case .p256: generated = faultline_EVP_EC_gen_P256()
        case .rsa(let bits): generated = faultline_EVP_RSA_gen(bits)
        }
        guard let generated else { throw .openSSL("cannot generate a \(algorithm) key") }
        return PrivateKey(taking: generated)
    }

    /// The first private key in the PEM text `bytes` (PKCS #8, or the traditional RSA/EC forms). An encrypted key
    /// is refused rather than prompting on the terminal for a passphrase; `source` names the file in errors.
    package convenience init(pem bytes: [UInt8], source: String) throws(TLSSetupError) {
        guard bytes.count < Int(Int32.max) else { throw TLSSetupError("\(source) is too large to be a private key") }
        ERR_clear_error()
        let key: OpaquePointer? = bytes.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            // A callback that supplies no passphrase: OpenSSL's default one would read the terminal.
            return PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
        }
        guard let key else {
            throw .openSSL("\(source) holds no readable PEM private key (an encrypted key is not supported)")
        }
        self.init(taking: key)
    }

    /// Whether this is an RSA key (a certificate for it may also allow keyEncipherment).
    package var isRSA: Bool { EVP_PKEY_get_base_id(pointer) == EVP_PKEY_RSA }

    /// The key's size in bits: the modulus for RSA, the field size for an elliptic curve.
    package var bits: Int { Int(EVP_PKEY_get_bits(pointer)) }

    /// The key in unencrypted PKCS #8 PEM (`-----BEGIN PRIVATE KEY-----`).
    package func pem() throws(TLSSetupError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw .openSSL("BIO_new") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, pointer, nil, nil, 0, nil, nil) == 1 else {
            throw .openSSL("cannot encode a private key as PEM")
        }
        return MemoryBIO.text(bio)
    }

    /// The base64 SHA-256 of the DER SubjectPublicKeyInfo of this key's public half: the pin format of HPKP
    /// (RFC 7469 §2.4), OkHttp's CertificatePinner and TrustKit.
    package func spkiSHA256Base64() throws(TLSSetupError) -> String {
        try Self.spkiSHA256Base64(publicKey: pointer)
    }

    /// The pin (see `spkiSHA256Base64()`) of any `EVP_PKEY *`, such as a certificate's public key.
    package static func spkiSHA256Base64(publicKey: OpaquePointer) throws(TLSSetupError) -> String {
        let length = i2d_PUBKEY(publicKey, nil)
        guard length > 0 else { throw .openSSL("cannot encode a public key as DER") }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_PUBKEY(publicKey, &cursor)
        }
        guard written == length else { throw .openSSL("cannot encode a public key as DER") }
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var digestLength: UInt32 = 0
        guard EVP_Digest(der, der.count, &digest, &digestLength, EVP_sha256(), nil) == 1 else {
            throw .openSSL("cannot hash a public key")
        }
        return Data(digest[0..<Int(digestLength)]).base64EncodedString()
    }
}

/// Reading the bytes out of a memory BIO.
package enum MemoryBIO {
    /// Everything written to the memory BIO `bio`, as UTF-8 text (PEM is ASCII).
    package static func text(_ bio: OpaquePointer) -> String {
        var data: UnsafeMutablePointer<CChar>?
        let length = faultline_BIO_get_mem_data(bio, &data)
        guard let data, length > 0 else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }
}
