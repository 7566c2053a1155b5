#ifndef FAULTLINE_CLIBEVENT_SHIM_H
#define FAULTLINE_CLIBEVENT_SHIM_H
// The parts of libevent 2.1 that Faultline's event loop uses: the core loop, bufferevents and listeners.
// evhttp is deliberately not included: it rewrites responses, and Faultline must control every byte.
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/util.h>
// eventfd: how other threads wake the loop (not exposed by Swift's Glibc module).
#include <sys/eventfd.h>
#endif
