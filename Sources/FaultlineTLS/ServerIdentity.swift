import COpenSSL

/// What a TLS server presents: its certificate, the certificate's private key, and the intermediate certificates
/// sent after it (leaf first, never the root). Owns the OpenSSL objects; they are freed when the identity goes.
/// Nothing in it changes after creation, so one identity can serve many connections on any thread.
package final class ServerIdentity: @unchecked Sendable {
    /// The leaf certificate's `X509 *`, valid while this identity lives (SSL_CTX_use_certificate takes its own
    /// reference).
    package var certificate: OpaquePointer { leaf.pointer }
    /// The leaf's private key as an `EVP_PKEY *`, valid while this identity lives.
    package var privateKey: OpaquePointer { key.pointer }
    /// The `X509 *` certificates sent after the leaf, in order; empty for the catalogue's self-signed,
    /// untrusted-root and incomplete-chain certificates.
    package var chain: [OpaquePointer] { intermediates.map(\.pointer) }
    /// The pin of the leaf's public key: base64 SHA-256 of its DER SubjectPublicKeyInfo (RFC 7469 §2.4), as
    /// `faultline ca --pins` prints it after `sha256/`.
    package let spkiSHA256Base64: String
    /// The leaf certificate in PEM.
    package let certificatePEM: String
    /// The chain certificates in PEM, one after another; empty when there is no chain.
    package let chainPEM: String

    /// `intermediates` as a STACK_OF(X509), built once: every handshake that serves this identity passes it to
    /// SSL_set1_chain, which copies the stack and takes its own reference on each certificate, so it is only read
    /// after creation and may be shared between loop threads. It borrows its certificates from `intermediates`
    /// (sk_X509_free in deinit frees the stack, not them).
    package let chainStack: OpaquePointer

    private let leaf: X509Certificate
    private let key: PrivateKey
    private let intermediates: [X509Certificate]

    package init(leaf: X509Certificate, key: PrivateKey, chain: [X509Certificate]) throws(TLSSetupError) {
        let spkiSHA256Base64 = try leaf.spkiSHA256Base64()
        let certificatePEM = try leaf.pem()
        var chainPEM = ""
        for certificate in chain { chainPEM += try certificate.pem() }
        // The stack last, after everything that can throw, so that a throw leaves nothing to free.
        guard let stack = faultline_sk_X509_new_null() else { throw .openSSL("sk_X509_new_null") }
        for certificate in chain where faultline_sk_X509_push(stack, certificate.pointer) == 0 {
            faultline_sk_X509_free(stack)
            throw .openSSL("sk_X509_push")
        }
        self.leaf = leaf
        self.key = key
        self.intermediates = chain
        self.spkiSHA256Base64 = spkiSHA256Base64
        self.certificatePEM = certificatePEM
        self.chainPEM = chainPEM
        self.chainStack = stack
    }

    deinit { faultline_sk_X509_free(chainStack) }
}
