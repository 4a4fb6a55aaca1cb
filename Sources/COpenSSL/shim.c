#include "COpenSSL.h"
#include <stdio.h>
#include <string.h>

const char *sk_openssl_version_string(void) {
    return OpenSSL_version(OPENSSL_VERSION);
}

int sk_x509_stack_count(const STACK_OF(X509) *stack) {
    return sk_X509_num(stack);
}

X509 *sk_x509_stack_value(const STACK_OF(X509) *stack, int index) {
    return sk_X509_value(stack, index);
}

STACK_OF(X509) *sk_x509_stack_new(void) {
    return sk_X509_new_null();
}

int sk_x509_stack_push(STACK_OF(X509) *stack, X509 *certificate) {
    if (X509_up_ref(certificate) != 1) {
        return 0;
    }
    if (sk_X509_push(stack, certificate) <= 0) {
        X509_free(certificate);
        return 0;
    }
    return 1;
}

void sk_x509_stack_free(STACK_OF(X509) *stack) {
    sk_X509_pop_free(stack, X509_free);
}

char *sk_x509_subject_alt_names(X509 *certificate) {
    GENERAL_NAMES *names = X509_get_ext_d2i(certificate, NID_subject_alt_name, NULL, NULL);
    if (names == NULL) {
        return NULL;
    }
    BIO *bio = BIO_new(BIO_s_mem());
    if (bio == NULL) {
        GENERAL_NAMES_free(names);
        return NULL;
    }
    for (int index = 0; index < sk_GENERAL_NAME_num(names); index++) {
        const GENERAL_NAME *name = sk_GENERAL_NAME_value(names, index);
        if (name->type == GEN_DNS) {
            const ASN1_IA5STRING *dns = name->d.dNSName;
            BIO_write(bio, "DNS:", 4);
            BIO_write(bio, ASN1_STRING_get0_data(dns), ASN1_STRING_length(dns));
            BIO_write(bio, "\n", 1);
        } else if (name->type == GEN_IPADD) {
            const ASN1_OCTET_STRING *ip = name->d.iPAddress;
            char text[64];
            const unsigned char *bytes = ASN1_STRING_get0_data(ip);
            int length = ASN1_STRING_length(ip);
            if (length == 4) {
                snprintf(text, sizeof text, "IP:%u.%u.%u.%u\n", bytes[0], bytes[1], bytes[2], bytes[3]);
                BIO_puts(bio, text);
            } else if (length == 16) {
                BIO_puts(bio, "IP:");
                for (int part = 0; part < 8; part++) {
                    snprintf(text, sizeof text, part < 7 ? "%x:" : "%x\n", (bytes[2 * part] << 8) | bytes[2 * part + 1]);
                    BIO_puts(bio, text);
                }
            }
        }
    }
    GENERAL_NAMES_free(names);
    BIO_write(bio, "", 1);
    char *data = NULL;
    long length = BIO_get_mem_data(bio, &data);
    char *copy = NULL;
    if (length > 0) {
        copy = OPENSSL_malloc((size_t)length);
        if (copy != NULL) {
            memcpy(copy, data, (size_t)length);
        }
    }
    BIO_free(bio);
    return copy;
}

int sk_x509_spki_der(X509 *certificate, unsigned char **out) {
    X509_PUBKEY *key = X509_get_X509_PUBKEY(certificate);
    if (key == NULL) {
        return -1;
    }
    *out = NULL;
    return i2d_X509_PUBKEY(key, out);
}

void sk_openssl_free(void *pointer) {
    OPENSSL_free(pointer);
}

SSL_CTX *sk_ssl_ctx_of_store(X509_STORE_CTX *store) {
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    return ssl != NULL ? SSL_get_SSL_CTX(ssl) : NULL;
}

SSL_CTX *sk_ssl_client_context(int min_version, int max_version) {
    SSL_CTX *context = SSL_CTX_new(TLS_client_method());
    if (context == NULL) {
        return NULL;
    }
    if (SSL_CTX_set_min_proto_version(context, min_version) != 1 ||
        (max_version != 0 && SSL_CTX_set_max_proto_version(context, max_version) != 1)) {
        SSL_CTX_free(context);
        return NULL;
    }
    SSL_CTX_set_mode(context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);
    sk_ssl_ctx_refuse_renegotiation(context);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    // OpenSSL 3 reports a peer that closes without close_notify as an error (SSL_ERROR_SSL, "unexpected eof");
    // read it as the end of stream, as libcurl reports it on a stream that was TLS from the start.
    SSL_CTX_set_options(context, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
    return context;
}

void sk_ssl_ctx_refuse_renegotiation(SSL_CTX *context) {
    SSL_CTX_set_options(context, SSL_OP_NO_RENEGOTIATION);
}

int sk_ssl_ctx_refuses_renegotiation(SSL_CTX *context) {
    return (SSL_CTX_get_options(context) & SSL_OP_NO_RENEGOTIATION) != 0 ? 1 : 0;
}

int sk_ssl_set_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

int sk_ssl_alpn_selected_h2(const SSL *ssl) {
    const unsigned char *protocol = NULL;
    unsigned int length = 0;
    SSL_get0_alpn_selected(ssl, &protocol, &length);
    return length == 2 && protocol[0] == 'h' && protocol[1] == '2';
}

int sk_ssl_ctx_add1_chain_cert(SSL_CTX *context, X509 *certificate) {
    return (int)SSL_CTX_add1_chain_cert(context, certificate);
}
