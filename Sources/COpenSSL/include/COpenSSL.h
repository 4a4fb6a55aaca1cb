#ifndef SESSIONKIT_COPENSSL_H
#define SESSIONKIT_COPENSSL_H

// The system OpenSSL for Swift. Some OpenSSL APIs are macros, which Swift cannot import; the shim
// wraps the ones SessionKit needs as functions.
#include <openssl/opensslv.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/evp.h>
#include <openssl/err.h>
#include <openssl/bio.h>
#include <openssl/hmac.h>
#include <openssl/pkcs12.h>

/// The OpenSSL version string, e.g. "OpenSSL 3.0.19 27 Jan 2026".
const char *sk_openssl_version_string(void);

/// Number of certificates in a STACK_OF(X509) (a macro in OpenSSL).
int sk_x509_stack_count(const STACK_OF(X509) *stack);

/// The certificate at `index` of a STACK_OF(X509), not owned by the caller.
X509 *sk_x509_stack_value(const STACK_OF(X509) *stack, int index);

/// The SSL_CTX of the connection being verified, from the verify callback's store context.
SSL_CTX *sk_ssl_ctx_of_store(X509_STORE_CTX *store);

/// OPENSSL_free (a macro).
void sk_openssl_free(void *pointer);

/// A new, empty STACK_OF(X509) that does not own its certificates' references beyond those pushed.
STACK_OF(X509) *sk_x509_stack_new(void);

/// Pushes `certificate` (taking one reference of its own) onto `stack`; 0 on failure.
int sk_x509_stack_push(STACK_OF(X509) *stack, X509 *certificate);

/// Frees `stack` and releases every certificate on it.
void sk_x509_stack_free(STACK_OF(X509) *stack);

/// The DNS names and IP addresses of a certificate's subjectAltName, as a newline-separated string the caller
/// frees with OPENSSL_free: "DNS:name" and "IP:address" lines. NULL when there is no such extension.
char *sk_x509_subject_alt_names(X509 *certificate);

/// The certificate's SubjectPublicKeyInfo, DER-encoded into a buffer the caller frees with OPENSSL_free.
int sk_x509_spki_der(X509 *certificate, unsigned char **out);

/// A client SSL_CTX speaking TLS versions `min_version`…`max_version` (OpenSSL's `TLS1_2_VERSION`…; 0: no maximum),
/// with partial writes and moving write buffers allowed (non-blocking writes of a caller's slices), no session
/// cache, no renegotiation, and a peer's close without close_notify read as the end of stream (`SSL_OP_IGNORE_UNEXPECTED_EOF`, OpenSSL
/// 3; a truncation attack cannot be told from it). NULL on failure. (`SSL_CTX_set_min_proto_version` and `SSL_CTX_set_mode` are macros.)
SSL_CTX *sk_ssl_client_context(int min_version, int max_version);

/// Makes connections of `context` refuse a renegotiation the server asks for (`SSL_OP_NO_RENEGOTIATION`, a macro):
/// the handshake that the security policy checked is the connection's only one, and the check it calls back into
/// belongs to the transfer that opened the connection, which may be gone when a later transfer reuses it.
void sk_ssl_ctx_refuse_renegotiation(SSL_CTX *context);

/// Whether `context` refuses a renegotiation (1) or not (0).
int sk_ssl_ctx_refuses_renegotiation(SSL_CTX *context);

/// Sets the server name (SNI) of `ssl` (a macro in OpenSSL); 1 on success.
int sk_ssl_set_host_name(SSL *ssl, const char *name);

/// Whether `ssl`'s handshake selected HTTP/2 (`h2`) by ALPN: 1 yes, 0 no.
int sk_ssl_alpn_selected_h2(const SSL *ssl);

/// Adds `certificate` (one reference taken) to the chain `context` sends after its own certificate (a macro in
/// OpenSSL: `SSL_CTX_add1_chain_cert`); 1 on success.
int sk_ssl_ctx_add1_chain_cert(SSL_CTX *context, X509 *certificate);

#endif
