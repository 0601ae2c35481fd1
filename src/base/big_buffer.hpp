// big_buffer.hpp — a buffer of a read's size, its pages backed at once.
//
// The cache reader's sections and the learned store's text are read into
// fresh buffers of up to ~0.5 MB; prefault() (prefault.hpp) backs their
// pages in one system call instead of a page fault each.
#pragma once

#include <cstddef>
#include <memory>

#include "prefault.hpp"

namespace epload::detail {

/// Frees a buffer from big_alloc().
inline void free_big(char* p) { delete[] p; }

/// A buffer from big_alloc(); free_big() is its deleter.
using BigBuffer = std::unique_ptr<char[], void (*)(char*)>;

/// `n` uninitialised bytes (callers write every byte they read), their
/// pages backed.
inline BigBuffer big_alloc(std::size_t n) {
  char* p = new char[n == 0 ? 1 : n];
  prefault(p, n);
  return BigBuffer(p, free_big);
}

}  // namespace epload::detail
