#ifndef FAULTLINE_COPENSSL_SHIM_H
#define FAULTLINE_COPENSSL_SHIM_H
// OpenSSL 3 (Debian's libssl-dev, Homebrew's openssl@3), found through pkg-config `openssl`. Only the Faultline
// target imports it: the TLS transport drives OpenSSL over memory BIOs (ARCHITECTURE §3a), and the certificate
// authority builds its catalogue with the X509 API. OpenSSL spells many calls as macros over *_ctrl, which Swift
// cannot import; the inline functions below give those a name.
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/bio.h>
#include <openssl/rand.h>
#include <openssl/bn.h>
#include <openssl/rsa.h>
#include <openssl/ec.h>
#include <openssl/core_names.h>
#include <string.h>

// MARK: - SSL_CTX and SSL settings

static inline int faultline_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}
static inline int faultline_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}
static inline int faultline_SSL_set_min_proto_version(SSL *ssl, int version) {
    return (int)SSL_set_min_proto_version(ssl, version);
}
static inline int faultline_SSL_set_max_proto_version(SSL *ssl, int version) {
    return (int)SSL_set_max_proto_version(ssl, version);
}
static inline long faultline_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
static inline long faultline_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}
/// Takes its own reference on every certificate in `chain` (SSL_CTX_set1_chain).
static inline int faultline_SSL_CTX_set1_chain(SSL_CTX *ctx, STACK_OF(X509) *chain) {
    return (int)SSL_CTX_set1_chain(ctx, chain);
}
static inline int faultline_SSL_set1_chain(SSL *ssl, STACK_OF(X509) *chain) { return (int)SSL_set1_chain(ssl, chain); }

// MARK: - BIO

static inline long faultline_BIO_set_mem_eof_return(BIO *bio, int value) { return BIO_set_mem_eof_return(bio, value); }
static inline long faultline_BIO_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }

// MARK: - Stacks of X509

static inline STACK_OF(X509) *faultline_sk_X509_new_null(void) { return sk_X509_new_null(); }
static inline int faultline_sk_X509_push(STACK_OF(X509) *stack, X509 *cert) { return sk_X509_push(stack, cert); }
static inline int faultline_sk_X509_num(const STACK_OF(X509) *stack) { return sk_X509_num(stack); }
static inline X509 *faultline_sk_X509_value(const STACK_OF(X509) *stack, int index) { return sk_X509_value(stack, index); }
static inline void faultline_sk_X509_free(STACK_OF(X509) *stack) { sk_X509_free(stack); }
static inline void faultline_sk_X509_pop_free(STACK_OF(X509) *stack) { sk_X509_pop_free(stack, X509_free); }

// MARK: - Keys

/// A fresh P-256 (prime256v1) key; EVP_EC_gen is a macro over the variadic EVP_PKEY_Q_keygen.
static inline EVP_PKEY *faultline_EVP_EC_gen_P256(void) { return EVP_EC_gen("P-256"); }
/// A fresh RSA key of `bits` bits; EVP_RSA_gen is a macro over the variadic EVP_PKEY_Q_keygen.
static inline EVP_PKEY *faultline_EVP_RSA_gen(unsigned int bits) { return EVP_RSA_gen(bits); }

// MARK: - Memory

static inline void faultline_OPENSSL_free(void *pointer) { OPENSSL_free(pointer); }

// MARK: - The TLS transport (memory BIOs)

// Option bits and print flags OpenSSL composes in macros Swift cannot import.
static inline uint64_t faultline_SSL_OP_NO_TICKET(void) { return SSL_OP_NO_TICKET; }
static inline uint64_t faultline_SSL_OP_NO_RENEGOTIATION(void) { return SSL_OP_NO_RENEGOTIATION; }
static inline uint64_t faultline_SSL_OP_CIPHER_SERVER_PREFERENCE(void) { return SSL_OP_CIPHER_SERVER_PREFERENCE; }
static inline uint64_t faultline_SSL_OP_NO_COMPRESSION(void) { return SSL_OP_NO_COMPRESSION; }
static inline unsigned long faultline_XN_FLAG_RFC2253(void) { return XN_FLAG_RFC2253; }

static inline int faultline_BIO_reset(BIO *bio) { return BIO_reset(bio); }
static inline int faultline_SSL_set_app_data(SSL *ssl, void *data) { return SSL_set_ex_data(ssl, 0, data); }
static inline void *faultline_SSL_get_app_data(const SSL *ssl) { return SSL_get_ex_data(ssl, 0); }

// MARK: - The proxy's client side (Faultline/Proxy)

/// SNI for a client connection (SSL_set_tlsext_host_name is a macro over SSL_ctrl).
static inline int faultline_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

#endif
