// store.cpp — a small strict JSON reader for the learned-device store.
//
// The lazy autoload reads one small JSON file at every `import host`.  Python's
// `json` module costs ~4 ms to import (it pulls in `re`), more than the whole
// lazy start-up budget, so the file is read here instead: one read(2), one
// recursive-descent pass straight into Python objects.  The grammar is RFC
// 8259 JSON (objects, arrays, strings with every escape incl. surrogate
// pairs, numbers, true/false/null); anything else makes the whole read fail,
// and a failed read only means the devices are learned again.  Writing stays
// in Python (json.dumps), which happens only when something new was learned.
//
// At `import host` the autoload does not even need the dict: match_store()
// parses the same grammar but keeps the "backends" object in C++ (strings
// unescaped in place, a hash table of spans) and runs the discovery loop
// against it, so no Python object is made per stored backend (~100 fewer
// page faults and ~1.4 ms less per lazy start at 1,000 backends).
// read_store() remains for learning and merging, which need the dict.
//
// The file is trusted only when it belongs to the current user and nobody
// else can write it: which backends are deferred is decided from it.
#include "store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>  // strtod
#include <cstring>  // memmove
#include <functional>  // hash
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "epload/metadata.hpp"  // find_invalid_utf8
#include "big_buffer.hpp"         // src/
#include "pread_full.hpp"         // src/

namespace py = pybind11;

namespace epload::python {

namespace {

constexpr off_t k_max_store_bytes = 8 << 20;
constexpr int k_max_depth = 32;

struct Span {
  std::uint32_t off = 0, len = 0;
};

/// One member of the store's "backends" object: its key, and its strings
/// when it is an array of strings only ([stamp, device...] when right).
struct LearnedEntry {
  Span key;
  std::uint32_t first = 0, count = 0;  // in LearnedEntries::strings
  bool all_strings = true;
};

/// The "backends" object as match_store() keeps it, with no allocation per
/// backend: every string unescaped into one arena, entries and strings as
/// spans of it, and an open-addressing table from key to entry in which a
/// repeated key's last entry wins (as in a dict).
struct LearnedEntries {
  /// Where the strings are unescaped to: in situ, over the text already
  /// read (a string's unescaped form is never longer than its text, so the
  /// writer never overtakes the reader).
  struct InPlace {
    char* base = nullptr;
    char* w = nullptr;
    void append(const char* a, const char* b) {
      std::memmove(w, a, static_cast<std::size_t>(b - a));
      w += b - a;
    }
    InPlace& operator+=(char c) {
      *w++ = c;
      return *this;
    }
    std::uint32_t offset() const { return static_cast<std::uint32_t>(w - base); }
  };
  InPlace arena;
  std::vector<LearnedEntry> entries;
  std::vector<Span> strings;
  std::vector<std::uint32_t> table;  // entry index + 1; 0: empty

  void clear() {
    entries.clear();
    strings.clear();
    table.clear();
  }
  std::string_view view(Span s) const { return {arena.base + s.off, s.len}; }

  void build_table() {
    std::size_t size = 16;
    while (size < entries.size() * 2) size *= 2;
    table.assign(size, 0);
    for (std::uint32_t i = 0; i < entries.size(); ++i) {
      const std::string_view key = view(entries[i].key);
      for (std::size_t at = std::hash<std::string_view>()(key) & (size - 1);; at = (at + 1) & (size - 1)) {
        if (table[at] == 0 || view(entries[table[at] - 1].key) == key) {
          table[at] = i + 1;
          break;
        }
      }
    }
  }
  const LearnedEntry* find(std::string_view key) const {
    if (table.empty()) return nullptr;
    const std::size_t mask = table.size() - 1;
    for (std::size_t at = std::hash<std::string_view>()(key) & mask; table[at] != 0; at = (at + 1) & mask) {
      const LearnedEntry& e = entries[table[at] - 1];
      if (view(e.key) == key) return &e;
    }
    return nullptr;
  }
};

/// A store document as match_store() reads it.
struct StoreDoc {
  py::object header;             ///< the top-level dict without "backends"; None if not a dict
  bool backends_object = false;  ///< the (last) "backends" member is an object
  LearnedEntries backends;       ///< its members
};

class Reader {
 public:
  Reader(const char* p, const char* end) : m_p(p), m_end(end) {}

  /// Parses the whole text; a null handle means "malformed".
  py::object document() {
    py::object v = value(0);
    if (!v) return v;
    skip_space();
    if (m_p != m_end) return py::object();
    return v;
  }

  /// What match_store() needs of the whole text: the top-level members but
  /// "backends" as Python objects, and "backends", when it is an object, as
  /// C++ entries (no Python object per backend).  The same grammar and the
  /// same last-wins rule for repeated keys as document(); false exactly
  /// when document() would fail, given text that is valid UTF-8.
  bool match_document(StoreDoc& out) {
    skip_space();
    if (m_p == m_end) return false;
    if (*m_p != '{') {  // well-formed maybe, but no dict: no header
      out.header = py::none();
      return static_cast<bool>(document());
    }
    py::dict header;
    std::string key;
    const bool ok = members([&] { key.clear(); return string_into(key); },
                            [&] {
                              skip_space();
                              if (key != "backends") {
                                py::object k = decoded(key);
                                py::object v = k ? value(1) : py::object();
                                if (!v) return false;
                                header[k] = v;
                              } else if (m_p < m_end && *m_p == '{') {
                                if (!backend_entries(1, out.backends)) return false;
                                out.backends_object = true;
                              } else {
                                if (!value(1)) return false;
                                out.backends_object = false;
                                out.backends.clear();
                              }
                              return true;
                            });
    if (!ok) return false;
    skip_space();
    if (m_p != m_end) return false;
    out.header = std::move(header);
    return true;
  }

 private:
  /// Walks the object or array at m_p (its '{' or '['): read_item() at each
  /// member or element, before its leading space, until `close`.  False
  /// when malformed or when read_item() says so.
  template <class Item>
  bool sequence(char close, Item&& read_item) {
    ++m_p;  // '{' or '['
    skip_space();
    if (m_p < m_end && *m_p == close) {
      ++m_p;
      return true;
    }
    for (;;) {
      if (!read_item()) return false;
      skip_space();
      if (m_p == m_end) return false;
      if (*m_p == close) {
        ++m_p;
        return true;
      }
      if (*m_p != ',') return false;
      ++m_p;
    }
  }

  /// The object at m_p: read_key() at each member's opening quote,
  /// read_value() after its ':'.
  template <class Key, class Value>
  bool members(Key&& read_key, Value&& read_value) {
    return sequence('}', [&] {
      skip_space();
      if (m_p == m_end || *m_p != '"' || !read_key()) return false;
      skip_space();
      if (m_p == m_end || *m_p != ':') return false;
      ++m_p;
      return static_cast<bool>(read_value());
    });
  }

  /// The array at m_p: read_element() at each element.
  template <class Element>
  bool elements(Element&& read_element) {
    return sequence(']', read_element);
  }

  /// The string at m_p unescaped into out's arena, as span `span`.
  bool span_into(LearnedEntries& out, Span& span) {
    span.off = out.arena.offset();
    if (!string_into(out.arena)) return false;
    span.len = out.arena.offset() - span.off;
    return true;
  }

  /// The "backends" object at m_p, at nesting `depth`, into `out`.
  bool backend_entries(int depth, LearnedEntries& out) {
    out.clear();
    LearnedEntry e;
    const bool ok = members(
        [&] {
          e = LearnedEntry{};
          return span_into(out, e.key);
        },
        [&] {
          e.first = static_cast<std::uint32_t>(out.strings.size());
          skip_space();
          if (m_p < m_end && *m_p == '[') {
            if (!entry_array(depth + 1, out, e)) return false;  // where value(depth + 1) would parse it
          } else {
            if (!value(depth + 1)) return false;
            e.all_strings = false;
          }
          e.count = static_cast<std::uint32_t>(out.strings.size()) - e.first;
          out.entries.push_back(e);
          return true;
        });
    if (ok) out.build_table();
    return ok;
  }

  /// One entry's array at m_p, at nesting `depth`: its strings appended to
  /// out.strings, or e.all_strings false when another value is among them.
  bool entry_array(int depth, LearnedEntries& out, LearnedEntry& e) {
    if (depth > k_max_depth) return false;  // as value(depth) would say
    return elements([&] {
      skip_space();
      if (m_p < m_end && *m_p == '"' && depth + 1 <= k_max_depth) {
        return span_into(out, out.strings.emplace_back());
      }
      if (!value(depth + 1)) return false;
      e.all_strings = false;
      return true;
    });
  }

  void skip_space() {
    while (m_p < m_end && (*m_p == ' ' || *m_p == '\n' || *m_p == '\r' || *m_p == '\t')) ++m_p;
  }

  bool literal(const char* word) {
    const char* q = m_p;
    for (; *word != '\0'; ++word, ++q) {
      if (q == m_end || *q != *word) return false;
    }
    m_p = q;
    return true;
  }

  py::object value(int depth) {
    if (depth > k_max_depth) return py::object();
    skip_space();
    if (m_p == m_end) return py::object();
    switch (*m_p) {
      case '{': return object(depth);
      case '[': return array(depth);
      case '"': return string();
      case 't': return literal("true") ? py::object(py::bool_(true)) : py::object();
      case 'f': return literal("false") ? py::object(py::bool_(false)) : py::object();
      case 'n': return literal("null") ? py::object(py::none()) : py::object();
      default: return number();
    }
  }

  py::object object(int depth) {
    py::dict d;
    py::object k;
    const bool ok = members([&] { return static_cast<bool>(k = string()); },
                            [&] {
                              py::object v = value(depth + 1);
                              if (!v) return false;
                              d[k] = v;
                              return true;
                            });
    return ok ? py::object(std::move(d)) : py::object();
  }

  py::object array(int depth) {
    py::list l;
    const bool ok = elements([&] {
      py::object v = value(depth + 1);
      if (!v) return false;
      l.append(v);
      return true;
    });
    return ok ? py::object(std::move(l)) : py::object();
  }

  bool hex4(unsigned& out) {
    if (m_end - m_p < 4) return false;
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = *m_p++;
      out <<= 4;
      if (c >= '0' && c <= '9') {
        out |= static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        out |= static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        out |= static_cast<unsigned>(c - 'A' + 10);
      } else {
        return false;
      }
    }
    return true;
  }

  template <class Out>
  static void utf8(Out& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  /// The string at m_p (its opening quote), unescaped and appended to `s`
  /// (never longer than its text); false when malformed.  Not checked here:
  /// that raw bytes are valid UTF-8.
  template <class Out>
  bool string_into(Out& s) {
    ++m_p;  // '"'
    for (;;) {
      // Runs of plain characters (most of every key: paths and names) are
      // copied at once instead of character by character.
      const char* run = m_p;
      while (run < m_end && *run != '"' && *run != '\\' &&
             static_cast<unsigned char>(*run) >= 0x20) {
        ++run;
      }
      s.append(m_p, run);
      m_p = run;
      if (m_p == m_end) return false;
      const char c = *m_p++;
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        s += c;
        continue;
      }
      if (m_p == m_end) return false;
      switch (*m_p++) {
        case '"': s += '"'; break;
        case '\\': s += '\\'; break;
        case '/': s += '/'; break;
        case 'b': s += '\b'; break;
        case 'f': s += '\f'; break;
        case 'n': s += '\n'; break;
        case 'r': s += '\r'; break;
        case 't': s += '\t'; break;
        case 'u': {
          unsigned cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {  // high surrogate: a low one must follow
            unsigned lo = 0;
            if (m_end - m_p < 2 || m_p[0] != '\\' || m_p[1] != 'u') return false;
            m_p += 2;
            if (!hex4(lo) || lo < 0xDC00 || lo >= 0xE000) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            return false;
          }
          utf8(s, cp);
          break;
        }
        default: return false;
      }
    }
  }

  py::object string() {
    std::string s;
    return string_into(s) ? decoded(s) : py::object();
  }

  /// A str of UTF-8 `s`; a null handle (no error set) when it is not UTF-8.
  static py::object decoded(std::string_view s) {
    PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "strict");
    if (o == nullptr) {
      PyErr_Clear();
      return py::object();
    }
    return py::reinterpret_steal<py::object>(o);
  }

  py::object number() {
    const char* start = m_p;
    bool integral = true;
    if (m_p < m_end && *m_p == '-') ++m_p;
    const char* digits = m_p;
    while (m_p < m_end && *m_p >= '0' && *m_p <= '9') ++m_p;
    if (m_p == digits) return py::object();
    if (*digits == '0' && m_p - digits > 1) return py::object();  // RFC 8259: no leading zeros
    if (m_p < m_end && *m_p == '.') {
      integral = false;
      ++m_p;
      const char* frac = m_p;
      while (m_p < m_end && *m_p >= '0' && *m_p <= '9') ++m_p;
      if (m_p == frac) return py::object();
    }
    if (m_p < m_end && (*m_p == 'e' || *m_p == 'E')) {
      integral = false;
      ++m_p;
      if (m_p < m_end && (*m_p == '+' || *m_p == '-')) ++m_p;
      const char* exp = m_p;
      while (m_p < m_end && *m_p >= '0' && *m_p <= '9') ++m_p;
      if (m_p == exp) return py::object();
    }
    const std::string text(start, m_p);
    PyObject* o = integral ? PyLong_FromString(text.c_str(), nullptr, 10)
                           : PyFloat_FromDouble(std::strtod(text.c_str(), nullptr));
    if (o == nullptr) {
      PyErr_Clear();
      return py::object();
    }
    return py::reinterpret_steal<py::object>(o);
  }

  const char* m_p;
  const char* m_end;
};

// Reads the file if it can be trusted; no Python object is touched, so it
// runs without the GIL.
/// A store file's bytes: a fresh buffer, not zeroed first (every byte is
/// read into) and backed at once (big_buffer.hpp).
struct Text {
  epload::detail::BigBuffer bytes{nullptr, epload::detail::free_big};
  std::size_t size = 0;
  char* begin() const { return bytes.get(); }
  char* end() const { return bytes.get() + size; }
  std::string_view view() const { return {bytes.get(), size}; }
};

bool read_trusted(const std::string& path, Text& data) {
  // O_NONBLOCK: a FIFO in its place must not hang the open (fstat rejects it).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st;
  const bool trusted = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
                       (st.st_mode & 022) == 0 && st.st_size <= k_max_store_bytes;
  if (trusted) {
    const auto size = static_cast<std::size_t>(st.st_size);
    data.bytes = epload::detail::big_alloc(size);
    const ssize_t got = epload::detail::pread_full(fd, data.begin(), size, 0);
    data.size = got > 0 ? static_cast<std::size_t>(got) : 0;
  }
  ::close(fd);
  return trusted;
}

}  // namespace

namespace {

/// The lazy autoload's discovery loop over backend rows (name, value, group,
/// dist position) and their distributions (name, version, path, stamp).
/// `lookup(row, dist, stamp)` returns a new reference to the tuple of
/// devices learned for the row at this very stamp; nullptr without an error
/// when nothing was (or not for this stamp), nullptr with an error on
/// failure.  Returns (known, device_map, unknown, at_start, restat):
/// `known[i]` the tuple or None; `device_map` each device -> the indices
/// providing it, in order; `unknown` the indices without devices learned;
/// `at_start` those plus the hooks (an empty tuple learned); `restat` the
/// indices whose distribution has no stamp from the index (the caller stats
/// those itself).
template <class Lookup>
PyObject* match_rows(PyObject* rows, PyObject* dists, Lookup&& lookup) {
  const Py_ssize_t n = PyList_GET_SIZE(rows);
  Ref known(PyList_New(n));
  Ref device_map(PyDict_New());
  Ref unknown(PyList_New(0));
  Ref at_start(PyList_New(0));
  Ref restat(PyList_New(0));
  if (!known.p || !device_map.p || !unknown.p || !at_start.p || !restat.p) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    Py_INCREF(Py_None);
    PyList_SET_ITEM(known.p, i, Py_None);
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* row = PyList_GET_ITEM(rows, i);
    if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 4) {
      PyErr_SetString(PyExc_TypeError, "match_store: bad row");
      return nullptr;
    }
    const Py_ssize_t pos = PyLong_AsSsize_t(PyTuple_GET_ITEM(row, 3));
    if (pos < 0 || pos >= PyTuple_GET_SIZE(dists)) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "match_store: bad position");
      return nullptr;
    }
    PyObject* dist = PyTuple_GET_ITEM(dists, pos);
    if (!PyTuple_Check(dist) || PyTuple_GET_SIZE(dist) != 4) {
      PyErr_SetString(PyExc_TypeError, "match_store: bad distribution");
      return nullptr;
    }
    Ref idx(PyLong_FromSsize_t(i));
    if (!idx.p) return nullptr;
    PyObject* stamp = PyTuple_GET_ITEM(dist, 3);
    if (!PyUnicode_Check(stamp) || PyUnicode_GET_LENGTH(stamp) == 0) {
      if (PyList_Append(restat.p, idx.p) != 0) return nullptr;
      continue;
    }
    Ref devices(lookup(row, dist, stamp));
    if (!devices.p) {
      if (PyErr_Occurred()) return nullptr;
      if (PyList_Append(unknown.p, idx.p) != 0 || PyList_Append(at_start.p, idx.p) != 0) return nullptr;
      continue;
    }
    const Py_ssize_t m = PyTuple_GET_SIZE(devices.p);
    if (m == 0 && PyList_Append(at_start.p, idx.p) != 0) return nullptr;  // a hook
    for (Py_ssize_t k = 0; k < m; ++k) {
      PyObject* device = PyTuple_GET_ITEM(devices.p, k);
      PyObject* list = PyDict_GetItemWithError(device_map.p, device);  // borrowed
      if (list == nullptr) {
        if (PyErr_Occurred()) return nullptr;
        Ref fresh(PyList_New(0));
        if (!fresh.p || PyDict_SetItem(device_map.p, device, fresh.p) != 0) return nullptr;
        list = fresh.p;
      }
      if (PyList_Append(list, idx.p) != 0) return nullptr;
    }
    PyList_SetItem(known.p, i, devices.release());  // steals; replaces None
  }
  return PyTuple_Pack(5, known.p, device_map.p, unknown.p, at_start.p, restat.p);
}


}  // namespace

bool utf8_of(PyObject* o, std::string_view& out) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(o, &size);
  if (data == nullptr) {
    PyErr_Clear();
    return false;
  }
  out = std::string_view(data, static_cast<std::size_t>(size));
  return true;
}

struct LearnedStore::Impl {
  Text data;  ///< the file; its strings unescaped in place
  StoreDoc doc;
};

LearnedStore::LearnedStore() : m_impl(std::make_unique<Impl>()) {}
LearnedStore::~LearnedStore() = default;

bool LearnedStore::open(const std::string& path) {
  Impl& m = *m_impl;
  bool ok = false;
  {
    py::gil_scoped_release release;
    ok = read_trusted(path, m.data);
  }
  // Non-ASCII bytes can only stand inside strings in well-formed JSON, and
  // read_store() fails on a string that is not UTF-8: the same verdict.
  if (!ok || find_invalid_utf8(m.data.view()) != std::string::npos) return false;
  Reader reader(m.data.begin(), m.data.end());
  m.doc.backends.arena.base = m.doc.backends.arena.w = m.data.begin();  // unescaped in situ
  return reader.match_document(m.doc);
}

const py::object& LearnedStore::header() const { return m_impl->doc.header; }

bool LearnedStore::has_backends() const { return m_impl->doc.backends_object; }

LearnedStore::Entry LearnedStore::find(std::string_view key) const {
  const LearnedEntry* e = m_impl->doc.backends.find(key);
  if (e == nullptr || !e->all_strings || e->count == 0) return {};
  return {e->first, e->count};
}

std::string_view LearnedStore::string(Entry e, std::uint32_t k) const {
  const LearnedEntries& b = m_impl->doc.backends;
  return b.view(b.strings[e.first + k]);
}

py::object match_store(const std::string& path, py::object rows, py::object dists) {
  if (!PyList_Check(rows.ptr()) || !PyTuple_Check(dists.ptr())) {
    throw py::type_error("match_store(path, list, tuple)");
  }
  LearnedStore store;
  if (!store.open(path)) return py::none();
  if (!store.has_backends()) return py::make_tuple(store.header(), py::none());
  std::string key;
  auto lookup = [&](PyObject* row, PyObject* dist, PyObject* stamp) -> PyObject* {
    PyObject* name = PyTuple_GET_ITEM(row, 0);
    PyObject* value = PyTuple_GET_ITEM(row, 1);
    PyObject* where = PyTuple_GET_ITEM(dist, 2);
    if (!PyUnicode_Check(name) || !PyUnicode_Check(value) || !PyUnicode_Check(where)) {
      PyErr_SetString(PyExc_TypeError, "match_store: a row's name, value or path is not a str");
      return nullptr;
    }
    std::string_view n, v, w, want;
    if (!utf8_of(name, n) || !utf8_of(value, v) || !utf8_of(where, w) || !utf8_of(stamp, want)) return nullptr;
    key.assign(n).append(1, '\x1f').append(v).append(1, '\x1f').append(w);
    const LearnedStore::Entry e = store.find(key);  // [stamp, device...] for this very stamp
    if (e.count == 0 || want != store.string(e, 0)) return nullptr;
    Ref devices(PyTuple_New(static_cast<Py_ssize_t>(e.count - 1)));
    if (!devices.p) return nullptr;
    for (std::uint32_t k = 1; k < e.count; ++k) {
      const std::string_view d = store.string(e, k);
      PyObject* o = PyUnicode_DecodeUTF8(d.data(), static_cast<Py_ssize_t>(d.size()), "strict");
      if (o == nullptr) return nullptr;
      PyTuple_SET_ITEM(devices.p, static_cast<Py_ssize_t>(k - 1), o);
    }
    return devices.release();
  };
  PyObject* matched = match_rows(rows.ptr(), dists.ptr(), lookup);
  if (matched == nullptr) throw py::error_already_set();
  return py::make_tuple(store.header(), py::reinterpret_steal<py::object>(matched));
}

py::object read_store(const std::string& path) {
  Text data;
  bool ok = false;
  {
    py::gil_scoped_release release;
    ok = read_trusted(path, data);
  }
  if (!ok) return py::none();
  Reader reader(data.begin(), data.end());
  py::object v = reader.document();
  if (!v) return py::none();
  return v;
}

}  // namespace epload::python
