#ifndef FAULTLINE_CNGHTTP2_SHIM_H
#define FAULTLINE_CNGHTTP2_SHIM_H
// nghttp2 (Debian's libnghttp2-dev, Homebrew's nghttp2), found through pkg-config `libnghttp2`. Only the
// Faultline target imports it: the HTTP/2 codec (ARCHITECTURE §4a). Debian 12 ships 1.52, which predates the
// `*2` variants of mem_send and the data provider; the calls used are the 1.52 ones, present in later
// releases too.
#include <nghttp2/nghttp2.h>
#endif
