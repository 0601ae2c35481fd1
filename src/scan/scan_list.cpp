// scan_list.cpp — one getdents64 loop per directory, then Lookup's grouping.
//
// Lookup appends each info to infos[key] (a dict: keys in first-insertion
// order) and search() chains the dict's lists, so two entries with one key
// ("cryptography-38.0.4.dist-info" and "cryptography.egg-info") come out
// together at the position of the first.  Keys are rarely shared, so the
// common case costs one sort of key indices and a linear check; only when a
// key repeats are entries re-ordered (stable, by the position of their key's
// first occurrence).
#include "scan_list.hpp"
#include "index_provenance.hpp"

#include <dirent.h>       // struct dirent64
#include <fcntl.h>        // open
#include <sys/syscall.h>  // SYS_getdents64
#include <unistd.h>       // close, syscall

#include <algorithm>  // sort, stable_sort
#include <cerrno>     // errno
#include <cstring>    // strlen

#include "epload/profile.hpp"

namespace epload::detail {

namespace {

// One getdents64 batch.  The system call, not glibc's getdents64() wrapper:
// that one appeared in glibc 2.30, and the release wheels run on glibc 2.28
// (manylinux_2_28).
ssize_t read_entries(int fd, char* buf, std::size_t size) {
  return static_cast<ssize_t>(::syscall(SYS_getdents64, fd, buf, size));
}

}  // namespace

int Listing::add_directory(std::uint32_t path, int fd, bool base_is_egg) {
  m_infos.clear();
  m_eggs.clear();
  m_keys.clear();
  m_key_off.clear();
  alignas(8) char buf[32 * 1024];
  for (;;) {
    profile::count(profile::Counter::readdir);
    const ssize_t n = read_entries(fd, buf, sizeof buf);
    if (n < 0) return errno;  // os.listdir raises: the path lists nothing
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      const auto* d = reinterpret_cast<const struct dirent64*>(buf + off);
      off += d->d_reclen;
      const char* nm = d->d_name;
      if (nm[0] == '.' && (nm[1] == 0 || (nm[1] == '.' && nm[2] == 0))) continue;
      const std::string_view child(nm, std::strlen(nm));
      const ChildKind kind = classify_child(child, base_is_egg);
      if (kind == ChildKind::none) continue;
      Candidate c;
      c.path = path;
      c.name_off = static_cast<std::uint32_t>(m_pool.size());
      c.name_len = static_cast<std::uint32_t>(child.size());
      c.kind = kind;
      m_pool.append(child);
      m_pool.push_back('\0');
      if (kind == ChildKind::egg) {
        m_eggs.push_back(c);  // one key per path (from the path's own name)
        continue;
      }
      m_key_off.push_back(static_cast<std::uint32_t>(m_keys.size()));
      lookup_key(child, m_keys);
      m_infos.push_back(c);
    }
  }
  const std::size_t n = m_infos.size();
  m_key_off.push_back(static_cast<std::uint32_t>(m_keys.size()));
  auto key = [&](std::uint32_t i) {
    return std::string_view(m_keys).substr(m_key_off[i], m_key_off[i + 1] - m_key_off[i]);
  };
  // Sort positions by (key, position); runs of equal keys are the groups.
  m_order.resize(n);
  for (std::uint32_t i = 0; i < n; ++i) m_order[i] = i;
  std::sort(m_order.begin(), m_order.end(), [&](std::uint32_t a, std::uint32_t b) {
    const int c = key(a).compare(key(b));
    return c != 0 ? c < 0 : a < b;
  });
  bool shared = false;
  m_rank.resize(n);
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i + 1;
    while (j < n && key(m_order[j]) == key(m_order[i])) ++j;
    for (std::size_t k = i; k < j; ++k) m_rank[m_order[k]] = m_order[i];  // first position
    shared |= j - i > 1;
    i = j;
  }
  if (shared) {
    for (std::uint32_t i = 0; i < n; ++i) m_order[i] = i;
    std::stable_sort(m_order.begin(), m_order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return m_rank[a] < m_rank[b]; });
    for (const std::uint32_t i : m_order) m_cands.push_back(m_infos[i]);
  } else {
    m_cands.insert(m_cands.end(), m_infos.begin(), m_infos.end());
  }
  m_cands.insert(m_cands.end(), m_eggs.begin(), m_eggs.end());
  return 0;
}

void Listing::add_stored(std::uint32_t path, std::span<const WatchedName> children, bool base_is_egg) {
  for (const WatchedName& child : children) {
    Candidate c;
    c.path = path;
    c.name_off = static_cast<std::uint32_t>(m_pool.size());
    c.name_len = static_cast<std::uint32_t>(child.rel_path.size());
    c.kind = classify_child(child.rel_path, base_is_egg);
    m_pool.append(child.rel_path);
    m_pool.push_back('\0');
    m_cands.push_back(c);
  }
}

MetadataIn metadata_in(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? MetadataIn::missing : MetadataIn::maybe;  // ENOTDIR: a file, maybe a zip
  const bool egg = base_is_egg(path);
  bool none = true;
  alignas(8) char buf[32 * 1024];
  for (;;) {
    profile::count(profile::Counter::readdir);
    const ssize_t n = read_entries(fd, buf, sizeof buf);
    if (n <= 0) {
      none = none && n == 0;
      break;
    }
    for (ssize_t off = 0; off < n && none;) {
      const auto* d = reinterpret_cast<const struct dirent64*>(buf + off);
      off += d->d_reclen;
      none = classify_child(std::string_view(d->d_name, std::strlen(d->d_name)), egg) == ChildKind::none;
    }
    if (!none) break;
  }
  ::close(fd);
  return none ? MetadataIn::none : MetadataIn::maybe;
}

}  // namespace epload::detail
