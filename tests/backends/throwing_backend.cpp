// throwing_backend.cpp — a C++ backend whose init throws (the loader must
// catch it at the boundary and report the backend as failed).
#include <stdexcept>

#include "epload/backend.h"

EPLOAD_DECLARE_DEVICES("tthrow");

EPLOAD_EXPORT int tb_init(const EploadHost* host) {
  if (!epload_host_compatible(host)) return EPLOAD_ERR_ABI;
  throw std::runtime_error("driver table corrupt");
}
