/* dep.c — a library a test backend depends on; installed nowhere on the
 * library search path, so loading that backend fails on the dependency. */
__attribute__((visibility("default"))) int epload_test_dep_value(void) { return 42; }
