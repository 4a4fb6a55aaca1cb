#include "CZlib.h"

int sk_zlib_deflate_init(z_stream *stream, int window_bits) {
    return deflateInit2(stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -window_bits, 8, Z_DEFAULT_STRATEGY);
}

int sk_zlib_inflate_init(z_stream *stream, int window_bits) {
    return inflateInit2(stream, -window_bits);
}
