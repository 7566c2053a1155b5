// Counts a process's heap allocations (malloc, calloc, realloc, posix_memalign, aligned_alloc) and writes the total
// to the file named by MCOUNT_FILE when it exits. Loaded with LD_PRELOAD by scripts/tls_allocations.py, which runs
// a server twice with different numbers of connections: the difference is what the extra connections cost.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
static atomic_ulong count;
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
void *malloc(size_t n) { atomic_fetch_add(&count, 1); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { atomic_fetch_add(&count, 1); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { atomic_fetch_add(&count, 1); return __libc_realloc(p, n); }
int posix_memalign(void **out, size_t a, size_t n) { atomic_fetch_add(&count, 1); void *p = __libc_memalign(a, n); if (!p) return 12; *out = p; return 0; }
void *aligned_alloc(size_t a, size_t n) { atomic_fetch_add(&count, 1); return __libc_memalign(a, n); }
static char saved_path[4096];
// Read at start: nginx clears the environment before it exits.
__attribute__((constructor)) static void init(void) {
    const char *path = getenv("MCOUNT_FILE");
    if (path) strncpy(saved_path, path, sizeof saved_path - 1);
}
static void dump(void) {
    const char *path = saved_path;
    if (!path[0]) return;
    char buf[32]; int len = 0; unsigned long v = atomic_load(&count);
    char tmp[32]; int t = 0; do { tmp[t++] = '0' + v % 10; v /= 10; } while (v);
    while (t) buf[len++] = tmp[--t];
    buf[len++] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) { write(fd, buf, len); close(fd); }
}
__attribute__((destructor)) static void fini(void) { dump(); }
