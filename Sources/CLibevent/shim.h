#ifndef FAULTLINE_CLIBEVENT_SHIM_H
#define FAULTLINE_CLIBEVENT_SHIM_H
// System headers first, before libevent's event-config.h defines _GNU_SOURCE: glibc then declares fd_set
// exactly as Foundation's CDispatch module sees it, and clang accepts the two modules side by side.
// (With _GNU_SOURCE first, fd_set's field is named differently and every file importing both fails.)
#include <sys/types.h>
#include <sys/time.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <netinet/in.h>
#ifdef __linux__
// Linux fast paths only (Sources/Faultline/Platform, docs/PORTABILITY.md); other platforms take the portable ones.
// eventfd: how other threads wake the loop (not exposed by Swift's Glibc module).
#include <sys/eventfd.h>
// inotify: `serve --watch` reloads edited scenario files from the loop.
#include <sys/inotify.h>
#endif
// The parts of libevent 2.1 that Faultline's event loop uses: the core loop, bufferevents and listeners.
// evhttp is deliberately not included: it rewrites responses, and Faultline must control every byte.
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/util.h>
#endif
