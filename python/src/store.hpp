// store.hpp — reading the learned-device store without importing `json`.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace epload::python {

/// Owns one reference; keeps the error paths of the C-API code short.
struct Ref {
  PyObject* p = nullptr;
  Ref() = default;
  explicit Ref(PyObject* o) : p(o) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() { Py_XDECREF(p); }
  PyObject* release() {
    PyObject* o = p;
    p = nullptr;
    return o;
  }
};

/// The UTF-8 of str `o` (cached in it); false (no error set) when it has
/// none (a lone surrogate from an undecodable path: no string read from
/// JSON, and no key of the store, has one).
bool utf8_of(PyObject* o, std::string_view& out);

/// Reads the JSON file at `path` into Python objects (dict, list, str, int,
/// float, bool, None).  Returns None, never raises, when the file is missing,
/// unreadable, not owned by the current user, writable by group or others,
/// larger than a few MB, or not well-formed JSON: the store is only a hint,
/// and a bad one means "learn again".
pybind11::object read_store(const std::string& path);

/// The lazy autoload's discovery loop against the store at `path`, without
/// a Python object per learned backend: None when read_store() would return
/// None; else (header, matched), `header` being the top-level dict without
/// "backends" (None when the document is not a dict) for the caller's
/// checks, and `matched` None when "backends" is missing or not an object,
/// else (known, device_map, unknown, at_start, restat) for the backend
/// `rows` (name, value, group, dist position) of `dists` (name, version,
/// path, stamp): an entry "name\x1fvalue\x1fpath" -> [stamp, device...]
/// counts only for its distribution's very stamp.
pybind11::object match_store(const std::string& path, pybind11::object rows, pybind11::object dists);

/// A store file parsed as match_store() parses it, kept for lookups without
/// a Python object per learned backend (the native discovery holds one).
class LearnedStore {
 public:
  LearnedStore();
  ~LearnedStore();
  LearnedStore(const LearnedStore&) = delete;
  LearnedStore& operator=(const LearnedStore&) = delete;

  /// Reads and parses `path` (the GIL held); false exactly when
  /// read_store() would return None.
  bool open(const std::string& path);
  /// The top-level dict without "backends"; None when it is not a dict.
  const pybind11::object& header() const;
  /// Whether the (last) "backends" member is an object.
  bool has_backends() const;

  /// The strings of one entry, [stamp, device...]; count 0: no usable entry.
  struct Entry {
    std::uint32_t first = 0, count = 0;
  };
  /// The entry for `key` when it is a non-empty array of strings only.
  Entry find(std::string_view key) const;
  /// String `k` (0: the stamp) of `e`.
  std::string_view string(Entry e, std::uint32_t k) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace epload::python
