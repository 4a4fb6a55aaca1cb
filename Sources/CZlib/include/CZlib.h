#ifndef SESSIONKIT_CZLIB_H
#define SESSIONKIT_CZLIB_H

// zlib for WebSocket permessage-deflate (RFC 7692): raw DEFLATE streams (no zlib header), as the extension sends
// them. C because zlib's initializers are macros (deflateInit2, inflateInit2) that pass the library's version and
// the size of z_stream.

#include <zlib.h>

/// Starts a raw deflate stream with a window of 2^`window_bits` bytes (9…15) at the default level. Returns Z_OK.
int sk_zlib_deflate_init(z_stream *stream, int window_bits);

/// Starts a raw inflate stream with a window of 2^`window_bits` bytes (8…15). Returns Z_OK.
int sk_zlib_inflate_init(z_stream *stream, int window_bits);

#endif
