import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An OpenSSL certificate (`X509 *`), freed when the last reference goes. The pointer is never mutated after the
/// certificate is signed, so a certificate can be shared between threads.
package final class X509Certificate: @unchecked Sendable {
    /// The `X509 *`, owned by this object.
    package let pointer: OpaquePointer

    /// Takes ownership of `pointer`.
    package init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit { X509_free(pointer) }

    /// Every certificate in the PEM text `bytes`, in order; at least one. `source` names the file in errors.
    package static func all(pem bytes: [UInt8], source: String) throws(TLSSetupError) -> [X509Certificate] {
        guard bytes.count < Int(Int32.max) else { throw TLSSetupError("\(source) is too large to read") }
        ERR_clear_error()
        var certificates: [X509Certificate] = []
        let ended: Bool = bytes.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return false }
            defer { BIO_free(bio) }
            while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) {
                certificates.append(X509Certificate(taking: certificate))
            }
            // The loop ends on "no start line" when the text has no further certificate; any other error is a
            // certificate that is there but broken.
            let last = ERR_peek_last_error()
            guard ERR_GET_REASON(last) == PEM_R_NO_START_LINE else { return false }
            ERR_clear_error()
            return true
        }
        guard ended else { throw .openSSL("\(source) holds a certificate OpenSSL cannot read") }
        guard !certificates.isEmpty else { throw TLSSetupError("\(source) holds no PEM certificate") }
        return certificates
    }

    /// The certificate in PEM (`-----BEGIN CERTIFICATE-----`).
    package func pem() throws(TLSSetupError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw .openSSL("BIO_new") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_X509(bio, pointer) == 1 else { throw .openSSL("cannot encode a certificate as PEM") }
        return MemoryBIO.text(bio)
    }

    /// Whether `key` is the private half of this certificate's public key.
    package func matches(_ key: PrivateKey) -> Bool {
        defer { ERR_clear_error() }
        return X509_check_private_key(pointer, key.pointer) == 1
    }

    /// Whether this certificate's signature verifies with `issuerKey`'s public half.
    package func isSigned(by issuerKey: PrivateKey) -> Bool {
        defer { ERR_clear_error() }
        return X509_verify(pointer, issuerKey.pointer) == 1
    }

    /// The pin of this certificate's public key (`PrivateKey.spkiSHA256Base64()`).
    package func spkiSHA256Base64() throws(TLSSetupError) -> String {
        guard let publicKey = X509_get0_pubkey(pointer) else { throw .openSSL("certificate without a public key") }
        return try PrivateKey.spkiSHA256Base64(publicKey: publicKey)
    }

    /// A new X.509 v3 certificate for `profile`, certifying `subjectKey`, with a random positive 128-bit serial
    /// number (RFC 5280 §4.1.2.2: at most 20 octets; CA/Browser Forum: at least 64 random bits), signed with
    /// SHA-256 by `issuer`'s key. A nil `issuer` makes the certificate sign itself with `subjectKey`. It carries a
    /// subjectKeyIdentifier and, when it has an issuer, an authorityKeyIdentifier (RFC 5280 §4.2.1.1–2).
    package static func issue(
        _ profile: CertificateProfile, subjectKey: PrivateKey, issuer: (certificate: X509Certificate, key: PrivateKey)?
    ) throws(TLSSetupError) -> X509Certificate {
        guard let raw = X509_new() else { throw .openSSL("X509_new") }
        let certificate = X509Certificate(taking: raw)
        let x509 = certificate.pointer
        guard X509_set_version(x509, Int(X509_VERSION_3)) == 1 else { throw .openSSL("X509_set_version") }
        try setRandomSerial(x509)

        guard let name = X509_NAME_new() else { throw .openSSL("X509_NAME_new") }
        defer { X509_NAME_free(name) }
        guard X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, "Faultline", -1, -1, 0) == 1,
              X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, profile.commonName, -1, -1, 0) == 1
        else { throw .openSSL("cannot make the subject name CN=\(profile.commonName)") }
        guard X509_set_subject_name(x509, name) == 1 else { throw .openSSL("X509_set_subject_name") }
        let issuerName = issuer.map { X509_get_subject_name($0.certificate.pointer) } ?? name
        guard X509_set_issuer_name(x509, issuerName) == 1 else { throw .openSSL("X509_set_issuer_name") }

        guard ASN1_TIME_set(X509_getm_notBefore(x509), profile.notBefore) != nil,
              ASN1_TIME_set(X509_getm_notAfter(x509), profile.notAfter) != nil
        else { throw .openSSL("cannot set the validity of CN=\(profile.commonName)") }
        guard X509_set_pubkey(x509, subjectKey.pointer) == 1 else { throw .openSSL("X509_set_pubkey") }

        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer?.certificate.pointer ?? x509, x509, nil, nil, 0)
        var extensions: [(Int32, String)] = [
            (NID_basic_constraints, profile.basicConstraints),
            (NID_key_usage, profile.keyUsage),
            (NID_subject_key_identifier, "hash"),
        ]
        // A self-signed certificate may omit the authorityKeyIdentifier (RFC 5280 §4.2.1.1); one with an issuer
        // names the issuer's subjectKeyIdentifier, so a client can pick the right issuer among several.
        if issuer != nil { extensions.append((NID_authority_key_identifier, "keyid:always")) }
        if let usage = profile.extendedKeyUsage { extensions.append((NID_ext_key_usage, usage)) }
        if let names = profile.subjectAltName { extensions.append((NID_subject_alt_name, names)) }
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
                throw .openSSL("cannot make the extension \(String(cString: OBJ_nid2sn(nid))) = \(value)")
            }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x509, ext, -1) == 1 else { throw .openSSL("X509_add_ext") }
        }

        guard X509_sign(x509, (issuer?.key ?? subjectKey).pointer, EVP_sha256()) > 0 else {
            throw .openSSL("cannot sign the certificate CN=\(profile.commonName)")
        }
        return certificate
    }

    /// A random 128-bit serial number, positive as RFC 5280 §4.1.2.2 requires (a BIGNUM from BN_rand is never
    /// negative; the top bit is set so that the number is never zero).
    private static func setRandomSerial(_ x509: OpaquePointer) throws(TLSSetupError) {
        guard let number = BN_new() else { throw .openSSL("BN_new") }
        defer { BN_free(number) }
        guard BN_rand(number, 128, BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ANY) == 1,
              BN_to_ASN1_INTEGER(number, X509_get_serialNumber(x509)) != nil
        else { throw .openSSL("cannot make a serial number") }
    }
}
