#ifndef SESSIONKIT_BENCH_CURL_H
#define SESSIONKIT_BENCH_CURL_H

// Raw libcurl for the benchmark's own client, independent of the library's CCurl module (which is internal to
// SessionKit): curl_easy_setopt and curl_multi_setopt are variadic, which Swift cannot call, so one typed entry point
// per argument kind.
#include <curl/curl.h>
// glibc's malloc_trim, for the soak's readings with SESSIONKIT_BENCH_TRIM (Swift's Glibc module leaves malloc.h out).
#include <malloc.h>

static inline CURLcode bench_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode bench_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode bench_curl_easy_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode bench_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

typedef size_t (*bench_curl_data_callback)(char *buffer, size_t size, size_t count, void *userdata);

static inline CURLcode bench_curl_easy_setopt_data_callback(CURL *handle, CURLoption option,
                                                            bench_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode bench_curl_easy_getinfo_double(CURL *handle, CURLINFO info, double *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLMcode bench_curl_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

#endif
