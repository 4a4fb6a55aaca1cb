#ifndef SESSIONKIT_CCURL_H
#define SESSIONKIT_CCURL_H

// libcurl for Swift. curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call,
// so this shim gives one typed entry point per argument kind.
#include <curl/curl.h>

static inline CURLcode sk_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

/// Limits a handle to HTTP and HTTPS, for its URL and every redirect, by the protocols' bits. The string options
/// (`CURLOPT_PROTOCOLS_STR`, `CURLOPT_REDIR_PROTOCOLS_STR`) that replaced them in 7.85 compare each name of the list
/// with every protocol libcurl knows, at every transfer: about 3k instructions a request against a few dozen.
static inline CURLcode sk_curl_easy_allow_http_only(CURL *handle) {
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
    long http = CURLPROTO_HTTP | CURLPROTO_HTTPS;
    CURLcode code = curl_easy_setopt(handle, CURLOPT_PROTOCOLS, http);
    if (code == CURLE_OK) {
        code = curl_easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS, http);
    }
#pragma clang diagnostic pop
    return code;
}

static inline CURLcode sk_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode sk_curl_easy_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode sk_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

typedef size_t (*sk_curl_data_callback)(char *buffer, size_t size, size_t count, void *userdata);

static inline CURLcode sk_curl_easy_setopt_data_callback(CURL *handle, CURLoption option,
                                                         sk_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode sk_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode sk_curl_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode sk_curl_easy_getinfo_double(CURL *handle, CURLINFO info, double *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode sk_curl_easy_getinfo_string(CURL *handle, CURLINFO info, char **value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode sk_curl_easy_getinfo_socket(CURL *handle, CURLINFO info, curl_socket_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

/// The OpenSSL `SSL *` of the transfer's TLS connection (CURLINFO_TLS_SSL_PTR), or NULL: no TLS connection yet, or
/// another TLS backend.
static inline void *sk_curl_easy_openssl_ssl(CURL *handle) {
    struct curl_tlssessioninfo *info = NULL;
    if (curl_easy_getinfo(handle, CURLINFO_TLS_SSL_PTR, &info) != CURLE_OK || info == NULL) return NULL;
    return info->backend == CURLSSLBACKEND_OPENSSL ? info->internals : NULL;
}

/// libcurl's socket open and close callbacks (CURLOPT_OPENSOCKETFUNCTION, CURLOPT_CLOSESOCKETFUNCTION): the curl
/// transport counts its connections with them (http.client.open_connections).
static inline CURLcode sk_curl_easy_setopt_opensocket_callback(CURL *handle, curl_opensocket_callback value) {
    return curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, value);
}

static inline CURLcode sk_curl_easy_setopt_closesocket_callback(CURL *handle, curl_closesocket_callback value) {
    return curl_easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, value);
}

/// The `events` bits of a `struct curl_waitfd` (macros in curl.h).
static const short sk_curl_wait_pollin = CURL_WAIT_POLLIN;
static const short sk_curl_wait_pollout = CURL_WAIT_POLLOUT;

static inline CURLMcode sk_curl_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

static inline CURLSHcode sk_curl_share_setopt_long(CURLSH *handle, CURLSHoption option, long value) {
    return curl_share_setopt(handle, option, value);
}

typedef CURLcode (*sk_curl_ssl_ctx_callback)(CURL *handle, void *ssl_ctx, void *userdata);

static inline CURLcode sk_curl_easy_setopt_ssl_ctx_callback(CURL *handle, sk_curl_ssl_ctx_callback value) {
    return curl_easy_setopt(handle, CURLOPT_SSL_CTX_FUNCTION, value);
}

typedef int (*sk_curl_xferinfo_callback)(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                                         curl_off_t ulnow);

static inline CURLcode sk_curl_easy_setopt_xferinfo_callback(CURL *handle, sk_curl_xferinfo_callback value) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, value);
}

typedef int (*sk_curl_prereq_callback)(void *userdata, char *primary_ip, char *local_ip, int primary_port,
                                       int local_port);

static inline CURLcode sk_curl_easy_setopt_prereq_callback(CURL *handle, sk_curl_prereq_callback value) {
    return curl_easy_setopt(handle, CURLOPT_PREREQFUNCTION, value);
}

typedef int (*sk_curl_seek_callback)(void *userdata, curl_off_t offset, int origin);

static inline CURLcode sk_curl_easy_setopt_seek_callback(CURL *handle, sk_curl_seek_callback value) {
    return curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, value);
}

typedef int (*sk_curl_trailer_callback)(struct curl_slist **list, void *userdata);

static inline CURLcode sk_curl_easy_setopt_trailer_callback(CURL *handle, sk_curl_trailer_callback value) {
    return curl_easy_setopt(handle, CURLOPT_TRAILERFUNCTION, value);
}

/// The libcurl version string, e.g. "7.88.1".
const char *sk_curl_version_string(void);
/* curl_version_info's feature bits (CURL_VERSION_LIBZ, CURL_VERSION_BROTLI, CURL_VERSION_ZSTD…). */
int sk_curl_version_features(void);

/* Whether `domain` (lowercase, ASCII or punycode, no trailing dot) is a public suffix (`com`, `co.uk`, `github.io`),
   by the list libcurl's own cookie engine reads: libpsl (libpsl.so.5, which libcurl4 depends on), loaded on first use
   with the system's newest list. 1 yes, 0 no, -1 when libpsl cannot be loaded. */
int sk_is_public_suffix(const char *domain);

#endif
