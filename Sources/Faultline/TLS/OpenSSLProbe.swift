import COpenSSL
enum OpenSSLProbe { static var version: String { String(cString: OpenSSL_version(OPENSSL_VERSION)) } }
