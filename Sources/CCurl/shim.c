#include "CCurl.h"

#include <dlfcn.h>
#include <pthread.h>

const char *sk_curl_version_string(void) {
    const curl_version_info_data *info = curl_version_info(CURLVERSION_NOW);
    return info != NULL ? info->version : "unknown";
}

int sk_curl_version_features(void) {
    const curl_version_info_data *info = curl_version_info(CURLVERSION_NOW);
    return info != NULL ? info->features : 0;
}

/* libpsl, loaded at run time: its headers are not installed with libcurl's, but its library is wherever libcurl's is. */
typedef struct sk_psl_ctx sk_psl_ctx;
static const sk_psl_ctx *sk_psl;
static int (*sk_psl_is_public_suffix2)(const sk_psl_ctx *, const char *, int);
static pthread_once_t sk_psl_once = PTHREAD_ONCE_INIT;

static void sk_psl_load(void) {
    void *library = dlopen("libpsl.so.5", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return;
    sk_psl_ctx *(*latest)(const char *) = (sk_psl_ctx * (*)(const char *)) dlsym(library, "psl_latest");
    const sk_psl_ctx *(*builtin)(void) = (const sk_psl_ctx *(*)(void))dlsym(library, "psl_builtin");
    sk_psl_is_public_suffix2 = (int (*)(const sk_psl_ctx *, const char *, int))dlsym(library, "psl_is_public_suffix2");
    /* The newer of the built-in list and the system's file (/usr/share/publicsuffix); kept for the process. */
    const sk_psl_ctx *context = latest != NULL ? latest(NULL) : NULL;
    if (context == NULL && builtin != NULL) context = builtin();
    sk_psl = context;
}

int sk_is_public_suffix(const char *domain) {
    pthread_once(&sk_psl_once, sk_psl_load);
    if (sk_psl == NULL || sk_psl_is_public_suffix2 == NULL || domain == NULL) return -1;
    /* PSL_TYPE_ANY (ICANN and private sections, as browsers and libcurl judge cookies). */
    return sk_psl_is_public_suffix2(sk_psl, domain, 3) ? 1 : 0;
}
