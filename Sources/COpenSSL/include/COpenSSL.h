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

/// The OpenSSL version string, e.g. "OpenSSL 3.0.19 27 Jan 2026".
const char *sk_openssl_version_string(void);

/// Number of certificates in a STACK_OF(X509) (a macro in OpenSSL).
int sk_x509_stack_count(const STACK_OF(X509) *stack);

/// The certificate at `index` of a STACK_OF(X509), not owned by the caller.
X509 *sk_x509_stack_value(const STACK_OF(X509) *stack, int index);

#endif
