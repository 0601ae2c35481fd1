/* epload/backend.h — the C ABI between epload and a native backend.
 *
 * A native backend is a shared library named by an entry point of its host's
 * autoload group (the host's own group, e.g. `myhost.backends`):
 *
 *     [myhost.backends]
 *     npu = my_npu._native:my_npu_init
 *
 * resolves to `my_npu/_native<suffix>` in the distribution's search-path
 * directory, <suffix> being the interpreter's extension suffix
 * (`.cpython-311-x86_64-linux-gnu.so`, what setuptools and scikit-build-core
 * produce), `.abi3.so` or `.so`, and `my_npu_init` is the exported init
 * function.  It loads in C++ hosts, in the `epload` command and in Python
 * hosts (`epload.autoload(group, host=...)`), always through dlopen, never
 * imported as a Python module.  PyTorch's group `torch.backends` is not one:
 * PyTorch calls each of its entry points as a Python callable.
 *
 *     #include <epload/backend.h>
 *     EPLOAD_DECLARE_DEVICES("npu", "npu2");   // optional, see below
 *
 *     EPLOAD_EXPORT int my_npu_init(const EploadHost* host) {
 *       if (!epload_host_compatible(host)) return EPLOAD_ERR_ABI;
 *       if (host->register_device(host->ctx, "npu", &k_npu_table) != EPLOAD_OK) return -1;
 *       return EPLOAD_OK;
 *     }
 *
 * The init runs at most once per process, when a device it provides is first
 * looked up (lazy mode), at start (eager mode, or when it provides no device:
 * a "hook"), never in mode off.  It returns EPLOAD_OK or a failure code; on
 * failure it should call host->set_error() with a message saying what went
 * wrong.  A C++ backend must not let exceptions escape its init (epload
 * catches them and reports the backend as failed, but the ABI is C).
 *
 * Declared devices: EPLOAD_DECLARE_DEVICES places the ABI version and the
 * device names in the ELF section "epload_devices", which epload reads from
 * the file without loading it.  Without a declaration the devices are learned
 * on the backend's first load and remembered while its library is unchanged.
 *
 * This header is plain C (C99 and C++), depends on <stdint.h> only, and is
 * versioned: EPLOAD_ABI_VERSION changes whenever a layout or a meaning below
 * changes; new members are only ever appended to EploadHost (check
 * host->size before using a member added after version 1).
 */
#ifndef EPLOAD_BACKEND_H
#define EPLOAD_BACKEND_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The ABI version this header describes. */
#define EPLOAD_ABI_VERSION 1

/** Return codes of init and of the host functions. */
#define EPLOAD_OK 0
/** Generic failure (the message says more). */
#define EPLOAD_ERR (-1)
/** init: the host speaks another ABI version (see epload_host_compatible). */
#define EPLOAD_ERR_ABI (-2)
/** register_device: bad name, or called outside init. lookup: not found. */
#define EPLOAD_ERR_INVALID (-3)
/** register_device: an earlier backend (index order) owns the device. */
#define EPLOAD_ERR_CONFLICT (-4)
/** lookup: the device's backend failed, or the lookup would wait on itself. */
#define EPLOAD_ERR_FAILED (-5)

/** Longest device name, in bytes, without the NUL. */
#define EPLOAD_MAX_DEVICE_NAME 63

/**
 * The host table passed to a backend's init.  Valid only during that call;
 * the function pointers may be called only from the thread running init.
 */
typedef struct EploadHost {
  /** EPLOAD_ABI_VERSION of the host. */
  uint32_t abi_version;
  /** sizeof(EploadHost) of the host: members past it do not exist. */
  uint32_t size;
  /** Opaque; pass it back as the first argument of the functions below. */
  void* ctx;
  /**
   * Registers `name` (1..EPLOAD_MAX_DEVICE_NAME bytes of [A-Za-z0-9_.:-])
   * with `device_table`, the backend's object for that device, which epload
   * hands out unchanged to whoever looks the device up.  The table must stay
   * valid for the life of the process (epload never unloads a backend).
   * Devices become visible when init returns EPLOAD_OK; none does if init
   * fails.  Returns EPLOAD_OK, EPLOAD_ERR_INVALID or EPLOAD_ERR_CONFLICT.
   */
  int (*register_device)(void* ctx, const char* name, void* device_table);
  /** Sets the message reported when init fails (copied; the last call wins). */
  void (*set_error)(void* ctx, const char* message);
  /**
   * Looks up another backend's device, loading that backend if needed (no
   * deadlock: epload holds no lock while a backend initialises).  On
   * EPLOAD_OK stores its table in *device_table.  A lookup of a device of the
   * backend being initialised, or a cycle of backends waiting on each other,
   * fails with EPLOAD_ERR_FAILED instead of hanging.
   */
  int (*lookup)(void* ctx, const char* device, void** device_table);
} EploadHost;

/** The type of a backend's init function (its name is the entry point's attr). */
typedef int (*EploadBackendInit)(const EploadHost* host);

/** True when `host` speaks this header's ABI. */
static inline int epload_host_compatible(const EploadHost* host) {
  return host != 0 && host->abi_version == EPLOAD_ABI_VERSION &&
         host->size >= (uint32_t)sizeof(EploadHost);
}

/** Exports a function from a library built with -fvisibility=hidden. */
#ifdef __cplusplus
#define EPLOAD_EXPORT extern "C" __attribute__((visibility("default")))
#else
#define EPLOAD_EXPORT __attribute__((visibility("default")))
#endif

/*
 * Declared devices.  The section holds NUL-terminated strings: first the tag
 * "epload-abi=<version>", then one device name per string; empty strings
 * (padding) are ignored.  Several declarations in one library concatenate.
 *   EPLOAD_DECLARE_DEVICES("npu", "npu2")   the backend provides these
 *   EPLOAD_DECLARE_HOOK()                   it provides no device: run it at start
 * At most 16 names per declaration, one declaration per translation unit.
 * The array is the static epload_declared_devices, so that the backend's
 * code may read its own declaration.
 */
#define EPLOAD_DEVICES_SECTION "epload_devices"
#define EPLOAD_ABI_TAG_PREFIX "epload-abi="
#define EPLOAD_STR_(x) #x
#define EPLOAD_STR(x) EPLOAD_STR_(x)
#define EPLOAD_ABI_TAG EPLOAD_ABI_TAG_PREFIX EPLOAD_STR(EPLOAD_ABI_VERSION)

#define EPLOAD_NAMES_1_(a) a "\0"
#define EPLOAD_NAMES_2_(a, ...) a "\0" EPLOAD_NAMES_1_(__VA_ARGS__)
#define EPLOAD_NAMES_3_(a, ...) a "\0" EPLOAD_NAMES_2_(__VA_ARGS__)
#define EPLOAD_NAMES_4_(a, ...) a "\0" EPLOAD_NAMES_3_(__VA_ARGS__)
#define EPLOAD_NAMES_5_(a, ...) a "\0" EPLOAD_NAMES_4_(__VA_ARGS__)
#define EPLOAD_NAMES_6_(a, ...) a "\0" EPLOAD_NAMES_5_(__VA_ARGS__)
#define EPLOAD_NAMES_7_(a, ...) a "\0" EPLOAD_NAMES_6_(__VA_ARGS__)
#define EPLOAD_NAMES_8_(a, ...) a "\0" EPLOAD_NAMES_7_(__VA_ARGS__)
#define EPLOAD_NAMES_9_(a, ...) a "\0" EPLOAD_NAMES_8_(__VA_ARGS__)
#define EPLOAD_NAMES_10_(a, ...) a "\0" EPLOAD_NAMES_9_(__VA_ARGS__)
#define EPLOAD_NAMES_11_(a, ...) a "\0" EPLOAD_NAMES_10_(__VA_ARGS__)
#define EPLOAD_NAMES_12_(a, ...) a "\0" EPLOAD_NAMES_11_(__VA_ARGS__)
#define EPLOAD_NAMES_13_(a, ...) a "\0" EPLOAD_NAMES_12_(__VA_ARGS__)
#define EPLOAD_NAMES_14_(a, ...) a "\0" EPLOAD_NAMES_13_(__VA_ARGS__)
#define EPLOAD_NAMES_15_(a, ...) a "\0" EPLOAD_NAMES_14_(__VA_ARGS__)
#define EPLOAD_NAMES_16_(a, ...) a "\0" EPLOAD_NAMES_15_(__VA_ARGS__)
#define EPLOAD_PICK_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, \
                     name, ...)                                                           \
  name
#define EPLOAD_NAMES_(...)                                                                 \
  EPLOAD_PICK_(__VA_ARGS__, EPLOAD_NAMES_16_, EPLOAD_NAMES_15_, EPLOAD_NAMES_14_,          \
               EPLOAD_NAMES_13_, EPLOAD_NAMES_12_, EPLOAD_NAMES_11_, EPLOAD_NAMES_10_,     \
               EPLOAD_NAMES_9_, EPLOAD_NAMES_8_, EPLOAD_NAMES_7_, EPLOAD_NAMES_6_,         \
               EPLOAD_NAMES_5_, EPLOAD_NAMES_4_, EPLOAD_NAMES_3_, EPLOAD_NAMES_2_,         \
               EPLOAD_NAMES_1_)(__VA_ARGS__)

#define EPLOAD_DECLARE_DEVICES(...)                                                   \
  __attribute__((used, section(EPLOAD_DEVICES_SECTION), aligned(1))) \
  static const char epload_declared_devices[] = EPLOAD_ABI_TAG "\0" EPLOAD_NAMES_(__VA_ARGS__)

#define EPLOAD_DECLARE_HOOK()                                                         \
  __attribute__((used, section(EPLOAD_DEVICES_SECTION), aligned(1))) \
  static const char epload_declared_devices[] = EPLOAD_ABI_TAG "\0"

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* EPLOAD_BACKEND_H */
