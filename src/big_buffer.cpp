// big_buffer.cpp — see big_buffer.hpp.
#include "big_buffer.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "prefault.hpp"

namespace epload::detail {

namespace {

constexpr std::size_t k_chunk = std::size_t{2} << 20;  // one huge page
constexpr std::size_t k_pooled_max = k_chunk / 2;      // bigger: a heap buffer
constexpr std::size_t k_align = 64;

struct Chunk {
  char* base = nullptr;
  std::size_t used = 0;  // bytes handed out (bump pointer)
  std::size_t live = 0;  // buffers not freed yet
};

std::atomic<bool> g_pool_on{false};
std::mutex g_mutex;
// Never destroyed: buffers may be freed while static destructors run (the
// Python module's indexes live until the interpreter is gone).
std::vector<Chunk>* g_chunks = nullptr;

/// A fresh chunk aligned to its size, marked for huge pages; nullptr when
/// the system has no memory for it.
char* map_chunk() {
  void* p = ::mmap(nullptr, 2 * k_chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t base = (at + k_chunk - 1) & ~(std::uintptr_t{k_chunk} - 1);
  if (base > at) ::munmap(p, base - at);
  const std::uintptr_t end = at + 2 * k_chunk;
  if (end > base + k_chunk) ::munmap(reinterpret_cast<void*>(base + k_chunk), end - (base + k_chunk));
  ::madvise(reinterpret_cast<void*>(base), k_chunk, MADV_HUGEPAGE);
  return reinterpret_cast<char*>(base);
}

/// `n` bytes from the pool; nullptr when it cannot serve them.
char* pool_alloc(std::size_t n) {
  n = (n + k_align - 1) & ~(k_align - 1);
  std::lock_guard lock(g_mutex);
  if (g_chunks == nullptr) g_chunks = new std::vector<Chunk>();
  if (g_chunks->empty() || g_chunks->back().used + n > k_chunk) {
    char* base = map_chunk();
    if (base == nullptr) return nullptr;
    g_chunks->push_back({base, 0, 0});
  }
  Chunk& c = g_chunks->back();
  char* p = c.base + c.used;
  c.used += n;
  ++c.live;
  return p;
}

}  // namespace

void free_big(char* p) {
  if (p == nullptr) return;
  if (g_pool_on.load(std::memory_order_acquire)) {
    std::lock_guard lock(g_mutex);
    if (g_chunks != nullptr) {
      for (std::size_t i = 0; i < g_chunks->size(); ++i) {
        Chunk& c = (*g_chunks)[i];
        if (p < c.base || p >= c.base + k_chunk) continue;
        if (--c.live == 0) {
          if (i + 1 == g_chunks->size()) {
            c.used = 0;  // the current chunk: cut from its start again
          } else {
            ::munmap(c.base, k_chunk);
            g_chunks->erase(g_chunks->begin() + static_cast<std::ptrdiff_t>(i));
          }
        }
        return;
      }
    }
  }
  delete[] p;
}

bool in_pool(const char* p) {
  std::lock_guard lock(g_mutex);
  if (g_chunks == nullptr) return false;
  for (const Chunk& c : *g_chunks) {
    if (p >= c.base && p < c.base + k_chunk) return true;
  }
  return false;
}

BigBuffer big_alloc(std::size_t n) {
  char* p = nullptr;
  if (n <= k_pooled_max && g_pool_on.load(std::memory_order_acquire)) p = pool_alloc(n);
  if (p == nullptr) p = new char[n == 0 ? 1 : n];  // not zeroed: callers write every byte they read
  prefault(p, n);
  return BigBuffer(p, free_big);
}

void use_huge_page_pool() {
  if (huge_pages_pay()) g_pool_on.store(true, std::memory_order_release);
}

bool huge_pages_pay(const char* setting, bool allowed, bool would_pay) {
  if (!allowed) return false;
  if (setting != nullptr && std::strcmp(setting, "0") == 0) return false;
  if (setting != nullptr && std::strcmp(setting, "1") == 0) return true;
  return would_pay;
}

bool huge_pages_pay(bool big_run) {
  const char* setting = std::getenv("EPLOAD_HUGE_PAGES");
  const bool told = setting != nullptr && (std::strcmp(setting, "0") == 0 || std::strcmp(setting, "1") == 0);
  // Told, or a big run: no fault measured.  The kernel's THP setting (a
  // file read, ~11 us here, in every CLI process before its first step) is
  // read last, only for a yes: huge_pages_pay(s, allowed, w) is allowed &&
  // huge_pages_pay(s, true, w), and where a fault is cheap the answer is no
  // whatever the setting says.
  const bool would_pay = !told && (big_run || faults_are_dear());
  return huge_pages_pay(setting, true, would_pay) && huge_pages_allowed();
}

bool huge_pages_allowed() {
  const int fd = ::open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[128];
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return false;
  text[n] = '\0';
  return std::strstr(text, "[never]") == nullptr;
}

}  // namespace epload::detail
