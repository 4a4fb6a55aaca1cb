#include "CCurl.h"

const char *sk_curl_version_string(void) {
    const curl_version_info_data *info = curl_version_info(CURLVERSION_NOW);
    return info != NULL ? info->version : "unknown";
}

// libdispatch's C entry points, declared here rather than through <dispatch/dispatch.h>, which is not on the C
// include path of SwiftPM's C targets. The process links libdispatch through Foundation.
typedef void *sk_dispatch_queue;
extern sk_dispatch_queue dispatch_get_current_queue(void);
extern void dispatch_retain(void *object);
extern void dispatch_release(void *object);
extern void dispatch_async_f(sk_dispatch_queue queue, void *context, void (*work)(void *));

void *sk_dispatch_current_queue(void) {
    sk_dispatch_queue queue = dispatch_get_current_queue();
    if (queue != 0) {
        dispatch_retain(queue);
    }
    return queue;
}

void sk_dispatch_release(void *queue) {
    dispatch_release(queue);
}

void sk_dispatch_async_f(void *queue, void *context, void (*work)(void *)) {
    dispatch_async_f(queue, context, work);
}
