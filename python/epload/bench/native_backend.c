/* native_backend.c — the synthetic native backend gen_env.py (beside it) compiles
 * (with cc, at generation time) and copies N times.
 *
 * Compile-time knobs (-D):
 *   NB_INIT_COST_US=n  init busy-waits n microseconds (CPU work, as a real
 *                      backend's init does; it does not sleep)
 *   NB_RELOCS=n        n in {0, 10, 100, 1000, 10000}: a table of n pointers to
 *                      n distinct exported functions, i.e. n symbol
 *                      relocations the dynamic linker resolves at dlopen
 *   NB_UNDECLARED      do not declare the device in the epload_devices
 *                      section (epload learns it on first load)
 *   NB_HOOK            declare and register no device (a hook)
 *   NB_FAIL            init fails with a message
 *   NB_BAD_ABI         the section claims backend ABI 99
 *   NB_DEP             init calls a function of libnb_dep.so (which the
 *                      generator does not install: a missing dependency)
 *
 * The device name: every copy must provide its own device, but compiling
 * 1,000 copies would take minutes.  So the name is a 31-byte placeholder,
 * "EPLOAD_DEVICE_PLACEHOLDER______", that appears exactly once in the
 * library; the generator overwrites it in each copy with the device name,
 * NUL-padded.  Declared, it sits in the epload_devices section, so the
 * declared and the registered name are the same bytes; undeclared, it is a
 * plain data array.  Either way init reads its name from that memory.
 *
 * Init: entry point attr "gen_backend_init".  It registers one NbDevice
 * whose fields let a host check which library answered and how often its
 * init ran.
 */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "epload/backend.h"

#ifndef NB_INIT_COST_US
#define NB_INIT_COST_US 0
#endif
#ifndef NB_RELOCS
#define NB_RELOCS 0
#endif

#define NB_PLACEHOLDER "EPLOAD_DEVICE_PLACEHOLDER______"

#if defined(NB_BAD_ABI)
__attribute__((used, section(EPLOAD_DEVICES_SECTION))) static const char nb_section[] =
    EPLOAD_ABI_TAG_PREFIX "99\0" NB_PLACEHOLDER "\0";
#define NB_NAME (nb_section + sizeof(EPLOAD_ABI_TAG_PREFIX "99"))
#elif defined(NB_HOOK)
EPLOAD_DECLARE_HOOK();
#elif defined(NB_UNDECLARED)
/* Not const: the compiler must read the (patched) bytes at run time. */
__attribute__((used)) static char nb_name[32] = NB_PLACEHOLDER;
#define NB_NAME ((const char*)nb_name)
#else
EPLOAD_DECLARE_DEVICES(NB_PLACEHOLDER);
#define NB_NAME (epload_declared_devices + sizeof(EPLOAD_ABI_TAG))
#endif

/* ---- relocations: NB_RELOCS distinct exported functions, one pointer each */
typedef void (*NbFn)(void);
#define NB_F(n) EPLOAD_EXPORT void nb_f##n(void) {}
#define NB_P(n) nb_f##n,
#define NB_10(M, p) M(p##0) M(p##1) M(p##2) M(p##3) M(p##4) M(p##5) M(p##6) M(p##7) M(p##8) M(p##9)
#define NB_100(M, p) NB_10(M, p##0) NB_10(M, p##1) NB_10(M, p##2) NB_10(M, p##3) NB_10(M, p##4) \
    NB_10(M, p##5) NB_10(M, p##6) NB_10(M, p##7) NB_10(M, p##8) NB_10(M, p##9)
#define NB_1000(M, p) NB_100(M, p##0) NB_100(M, p##1) NB_100(M, p##2) NB_100(M, p##3) \
    NB_100(M, p##4) NB_100(M, p##5) NB_100(M, p##6) NB_100(M, p##7) NB_100(M, p##8) NB_100(M, p##9)
#define NB_10000(M, p) NB_1000(M, p##0) NB_1000(M, p##1) NB_1000(M, p##2) NB_1000(M, p##3) \
    NB_1000(M, p##4) NB_1000(M, p##5) NB_1000(M, p##6) NB_1000(M, p##7) NB_1000(M, p##8) NB_1000(M, p##9)

#if NB_RELOCS == 0
#define NB_TABLE(M)
#elif NB_RELOCS == 10
#define NB_TABLE(M) NB_10(M, x)
#elif NB_RELOCS == 100
#define NB_TABLE(M) NB_100(M, x)
#elif NB_RELOCS == 1000
#define NB_TABLE(M) NB_1000(M, x)
#elif NB_RELOCS == 10000
#define NB_TABLE(M) NB_10000(M, x)
#else
#error "NB_RELOCS must be 0, 10, 100, 1000 or 10000"
#endif

NB_TABLE(NB_F)
/* Writable and referenced from init: the linker keeps every entry, and each
 * needs a symbol relocation because the functions are exported (and so
 * interposable). */
__attribute__((used)) static NbFn nb_relocs[NB_RELOCS + 1] = {NB_TABLE(NB_P) 0};

#ifdef NB_DEP
int nb_dep_value(void);
#endif

typedef struct NbDevice {
  unsigned magic; /* 0x6e617469 "nati" */
  const char* name;
  int (*init_count)(void);
  NbFn* relocs;
  int nrelocs;
} NbDevice;

static int nb_inits;
static int nb_init_count(void) { return nb_inits; }
static NbDevice nb_device = {0x6e617469u, 0, nb_init_count, nb_relocs, NB_RELOCS};

static void nb_burn(long us) {
  struct timespec now, end;
  if (us <= 0) return;
  clock_gettime(CLOCK_MONOTONIC, &end);
  end.tv_sec += us / 1000000;
  end.tv_nsec += (us % 1000000) * 1000;
  if (end.tv_nsec >= 1000000000) {
    end.tv_sec += 1;
    end.tv_nsec -= 1000000000;
  }
  do {
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (now.tv_sec < end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
}

EPLOAD_EXPORT int gen_backend_init(const EploadHost* host) {
  if (!epload_host_compatible(host)) return EPLOAD_ERR_ABI;
  ++nb_inits;
  nb_burn(NB_INIT_COST_US);
#ifdef NB_DEP
  if (nb_dep_value() != 7) return EPLOAD_ERR;
#endif
#ifdef NB_FAIL
  host->set_error(host->ctx, "synthetic failure (generated with a broken init)");
  return EPLOAD_ERR;
#endif
#ifdef NB_HOOK
  (void)nb_device;
  return EPLOAD_OK; /* a hook registers nothing */
#else
  nb_device.name = NB_NAME;
  return host->register_device(host->ctx, NB_NAME, &nb_device) == EPLOAD_OK ? EPLOAD_OK : EPLOAD_ERR;
#endif
}
