/* test_backend.h — the device table the test backends register. */
#ifndef EPLOAD_TEST_BACKEND_H
#define EPLOAD_TEST_BACKEND_H

#define TB_MAGIC 0x7e57bac3u
#define TB_PING 4242

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TbDevice {
  unsigned magic;
  const char* name;
  int (*init_count)(void); /* how often this library's init ran */
  int (*ping)(void);       /* returns TB_PING */
  const struct TbDevice* looked_up; /* TB_LOOKUP: what init's lookup returned */
} TbDevice;

#ifdef __cplusplus
}
#endif

#endif
