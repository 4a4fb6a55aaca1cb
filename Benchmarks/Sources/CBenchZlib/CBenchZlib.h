#ifndef SESSIONKIT_BENCH_ZLIB_H
#define SESSIONKIT_BENCH_ZLIB_H

// zlib for the loopback server's permessage-deflate (`RawDeflate`), whose sources this package compiles without the
// root package's CZlib module (a target name must be unique in a package graph): the same two entry points, inline.
#include <zlib.h>

static inline int sk_zlib_deflate_init(z_stream *stream, int window_bits) {
    return deflateInit2(stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -window_bits, 8, Z_DEFAULT_STRATEGY);
}

static inline int sk_zlib_inflate_init(z_stream *stream, int window_bits) {
    return inflateInit2(stream, -window_bits);
}

#endif
