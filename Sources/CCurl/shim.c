#include "CCurl.h"

const char *sk_curl_version_string(void) {
    const curl_version_info_data *info = curl_version_info(CURLVERSION_NOW);
    return info != NULL ? info->version : "unknown";
}

int sk_curl_version_features(void) {
    const curl_version_info_data *info = curl_version_info(CURLVERSION_NOW);
    return info != NULL ? info->features : 0;
}
