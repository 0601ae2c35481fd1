/* libepload_nolib_dep.so: the library torch_nolib's extension is linked
   against, built beside the test and never installed where the loader
   looks (tests/torch/nolib_build.py). */
int epload_nolib_dep_answer(void) { return 42; }
