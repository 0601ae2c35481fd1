/* test_backend.c — one source, many test backends (tests/backends/CMakeLists.txt
 * compiles it with different -D options).  Every variant exports tb_init.
 *
 *   TB_DECLARE="a","b"  declare these devices in the epload_devices section
 *   TB_HOOK             declare a hook (no devices) and register none
 *   TB_REG1, TB_REG2    device names init registers (string literals)
 *   TB_FAIL             init sets an error and returns EPLOAD_ERR
 *   TB_BAD_ABI          the section carries ABI tag 99
 *   TB_REJECT_ABI       init returns EPLOAD_ERR_ABI
 *   TB_SLEEP_MS         init sleeps this long (widens race windows)
 *   TB_LOOKUP="dev"     init looks up this device first;
 *   TB_LOOKUP_REQUIRED  ... and fails if that lookup fails
 *   TB_DEP              call a function of libepload_test_dep.so
 *   TB_CRASH            init dies of SIGSEGV (the process is gone)
 *   TB_ABORT            init calls abort() (SIGABRT)
 *   TB_BLOCK            when EPLOAD_TB_BLOCK_FD names a descriptor, init
 *                       writes a byte to it and never returns
 *   TB_PYINIT           also export PyInit__native, as a CPython extension
 *                       module named _native does
 *
 * The registered table is a TbDevice (tests/backends/test_backend.h), whose
 * functions let a test count inits and call into the library after load.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "epload/backend.h"
#include "test_backend.h"

#if defined(TB_BAD_ABI)
__attribute__((used, section(EPLOAD_DEVICES_SECTION))) static const char k_section[] =
    EPLOAD_ABI_TAG_PREFIX "99\0" TB_REG1 "\0";
#elif defined(TB_HOOK)
EPLOAD_DECLARE_HOOK();
#elif defined(TB_DECLARE)
EPLOAD_DECLARE_DEVICES(TB_DECLARE);
#endif

#ifdef TB_DEP
int epload_test_dep_value(void);
#endif

#ifdef TB_PYINIT
EPLOAD_EXPORT void* PyInit__native(void) { return NULL; }
#endif

static int g_inits;

static int count_inits(void) { return g_inits; }
static int ping(void) { return TB_PING; }

static TbDevice g_dev1 = {TB_MAGIC, "", count_inits, ping, 0};
static TbDevice g_dev2 = {TB_MAGIC, "", count_inits, ping, 0};

EPLOAD_EXPORT int tb_init(const EploadHost* host) {
  __atomic_add_fetch(&g_inits, 1, __ATOMIC_SEQ_CST);
#ifdef TB_REJECT_ABI
  host->set_error(host->ctx, "this backend needs ABI 7");
  return EPLOAD_ERR_ABI;
#endif
  if (!epload_host_compatible(host)) return EPLOAD_ERR_ABI;
#ifdef TB_SLEEP_MS
  {
    struct timespec ts = {TB_SLEEP_MS / 1000, (TB_SLEEP_MS % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
#endif
#ifdef TB_DEP
  if (epload_test_dep_value() != 42) return EPLOAD_ERR;
#endif
#ifdef TB_HOOK
  {
    const char* v = getenv("EPLOAD_TB_HOOK_RUNS");
    char buf[32];
    snprintf(buf, sizeof buf, "%d", (v ? atoi(v) : 0) + 1);
    setenv("EPLOAD_TB_HOOK_RUNS", buf, 1);
  }
#endif
#ifdef TB_LOOKUP
  {
    void* other = NULL;
    int rc = host->lookup(host->ctx, TB_LOOKUP, &other);
    if (rc == EPLOAD_OK) {
      g_dev1.looked_up = (const TbDevice*)other;
      g_dev2.looked_up = (const TbDevice*)other;
    }
#ifdef TB_LOOKUP_REQUIRED
    if (rc != EPLOAD_OK) {
      host->set_error(host->ctx, "lookup of " TB_LOOKUP " failed");
      return EPLOAD_ERR;
    }
#endif
  }
#endif
#ifdef TB_CRASH
  raise(SIGSEGV);
#endif
#ifdef TB_ABORT
  abort();
#endif
#ifdef TB_BLOCK
  {
    const char* fd = getenv("EPLOAD_TB_BLOCK_FD");
    if (fd != NULL) {
      (void)!write(atoi(fd), "r", 1);
      for (;;) pause();
    }
  }
#endif
#ifdef TB_FAIL
  host->set_error(host->ctx, "simulated failure: the device is unplugged");
  return EPLOAD_ERR;
#endif
#ifdef TB_REG1
  g_dev1.name = TB_REG1;
  (void)host->register_device(host->ctx, TB_REG1, &g_dev1); /* a conflict is fine */
#endif
#ifdef TB_REG2
  g_dev2.name = TB_REG2;
  (void)host->register_device(host->ctx, TB_REG2, &g_dev2);
#endif
  (void)g_dev1;
  (void)g_dev2;
  return EPLOAD_OK;
}
