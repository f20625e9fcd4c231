/* An LD_PRELOAD shim for bench/allocs-per-unit.sh: counts the process's calls to
 * malloc, calloc, realloc, posix_memalign, aligned_alloc and memalign (every thread's),
 * passes each to glibc, and at exit appends "allocs N" to the file $ALLOCS_OUT. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static unsigned long long count;
#define COUNT() __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED)

void *malloc(size_t n) { COUNT(); return __libc_malloc(n); }
void *calloc(size_t k, size_t n) { COUNT(); return __libc_calloc(k, n); }
void *realloc(void *p, size_t n) { COUNT(); return __libc_realloc(p, n); }
void *memalign(size_t a, size_t n) { COUNT(); return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { COUNT(); return __libc_memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
  COUNT();
  void *p = __libc_memalign(a, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

__attribute__((destructor)) static void report(void) {
  unsigned long long n = __atomic_load_n(&count, __ATOMIC_RELAXED);
  const char *path = getenv("ALLOCS_OUT");
  if (!path) return;
  FILE *f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "allocs %llu\n", n);
  fclose(f);
}
