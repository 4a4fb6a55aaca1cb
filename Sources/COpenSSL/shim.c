#include "COpenSSL.h"

const char *sk_openssl_version_string(void) {
    return OpenSSL_version(OPENSSL_VERSION);
}

int sk_x509_stack_count(const STACK_OF(X509) *stack) {
    return sk_X509_num(stack);
}

X509 *sk_x509_stack_value(const STACK_OF(X509) *stack, int index) {
    return sk_X509_value(stack, index);
}
