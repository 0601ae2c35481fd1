// loader_test_util.hpp — what the loader's tests share: options for a test
// environment, a loader made from it, and a device looked up or its error.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend_env.hpp"
#include "backends/test_backend.h"
#include "epload/loader.hpp"

namespace epload::testing {

inline LoaderOptions options_for(const BackendEnv& env, LoadMode mode = LoadMode::lazy) {
  LoaderOptions o;
  o.mode = mode;
  o.cache_dir = env.cache_dir();
  return o;
}

inline std::unique_ptr<Loader> make_loader(const BackendEnv& env, LoaderOptions o) {
  auto r = Loader::create(env.index(), std::move(o));
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return std::move(r).value();
}

inline const TbDevice* device_of(Loader& loader, std::string_view name) {
  auto r = loader.lookup(name);
  EXPECT_TRUE(r.ok()) << name << ": " << (r.ok() ? "" : r.error().message);
  if (!r.ok()) return nullptr;
  auto* d = static_cast<const TbDevice*>(r.value());
  EXPECT_EQ(d->magic, TB_MAGIC);
  return d;
}

inline std::string error_of(Loader& loader, std::string_view name) {
  auto r = loader.lookup(name);
  EXPECT_FALSE(r.ok()) << name << " unexpectedly found";
  return r.ok() ? std::string() : r.error().message;
}

inline std::vector<std::size_t> order(const Loader& l) { return l.load_order(); }

/// Sets (or, with nullptr, unsets) an environment variable for a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : m_name(name) {
    if (const char* old = std::getenv(name)) m_old = old, m_had = true;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (m_had) {
      ::setenv(m_name, m_old.c_str(), 1);
    } else {
      ::unsetenv(m_name);
    }
  }

 private:
  const char* m_name;
  std::string m_old;
  bool m_had = false;
};

}  // namespace epload::testing
