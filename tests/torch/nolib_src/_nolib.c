/* torch_nolib._nolib: a real CPython extension module that needs
   libepload_nolib_dep.so (a DT_NEEDED entry): importing it fails in the
   dynamic loader when that library is absent, as a vendor extension does
   without its driver. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

int epload_nolib_dep_answer(void);

static PyObject* answer(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyLong_FromLong(epload_nolib_dep_answer());
}

static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, "the library's answer"}, {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nolib", NULL, -1, methods};

PyMODINIT_FUNC PyInit__nolib(void) { return PyModule_Create(&module); }
