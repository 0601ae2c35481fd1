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
// The file is trusted only when it belongs to the current user and nobody
// else can write it: which backends are deferred is decided from it.
#include "store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>  // strtod
#include <string>

namespace py = pybind11;

namespace epload::python {

namespace {

constexpr off_t k_max_store_bytes = 8 << 20;
constexpr int k_max_depth = 32;

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

 private:
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
    ++m_p;  // '{'
    py::dict d;
    skip_space();
    if (m_p < m_end && *m_p == '}') {
      ++m_p;
      return d;
    }
    for (;;) {
      skip_space();
      if (m_p == m_end || *m_p != '"') return py::object();
      py::object k = string();
      if (!k) return k;
      skip_space();
      if (m_p == m_end || *m_p != ':') return py::object();
      ++m_p;
      py::object v = value(depth + 1);
      if (!v) return v;
      d[k] = v;
      skip_space();
      if (m_p == m_end) return py::object();
      if (*m_p == '}') {
        ++m_p;
        return d;
      }
      if (*m_p != ',') return py::object();
      ++m_p;
    }
  }

  py::object array(int depth) {
    ++m_p;  // '['
    py::list l;
    skip_space();
    if (m_p < m_end && *m_p == ']') {
      ++m_p;
      return l;
    }
    for (;;) {
      py::object v = value(depth + 1);
      if (!v) return v;
      l.append(v);
      skip_space();
      if (m_p == m_end) return py::object();
      if (*m_p == ']') {
        ++m_p;
        return l;
      }
      if (*m_p != ',') return py::object();
      ++m_p;
    }
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

  static void utf8(std::string& out, unsigned cp) {
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

  py::object string() {
    ++m_p;  // '"'
    std::string s;
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
      if (m_p == m_end) return py::object();
      const char c = *m_p++;
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) return py::object();
      if (c != '\\') {
        s += c;
        continue;
      }
      if (m_p == m_end) return py::object();
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
          if (!hex4(cp)) return py::object();
          if (cp >= 0xD800 && cp < 0xDC00) {  // high surrogate: a low one must follow
            unsigned lo = 0;
            if (m_end - m_p < 2 || m_p[0] != '\\' || m_p[1] != 'u') return py::object();
            m_p += 2;
            if (!hex4(lo) || lo < 0xDC00 || lo >= 0xE000) return py::object();
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            return py::object();
          }
          utf8(s, cp);
          break;
        }
        default: return py::object();
      }
    }
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
bool read_trusted(const std::string& path, std::string& data) {
  // O_NONBLOCK: a FIFO in its place must not hang the open (fstat rejects it).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st;
  const bool trusted = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
                       (st.st_mode & 022) == 0 && st.st_size <= k_max_store_bytes;
  if (trusted) {
    data.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < data.size()) {
      const ssize_t n = ::read(fd, data.data() + got, data.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    data.resize(got);
  }
  ::close(fd);
  return trusted;
}

}  // namespace

py::object read_store(const std::string& path) {
  std::string data;
  bool ok = false;
  {
    py::gil_scoped_release release;
    ok = read_trusted(path, data);
  }
  if (!ok) return py::none();
  Reader reader(data.data(), data.data() + data.size());
  py::object v = reader.document();
  if (!v) return py::none();
  return v;
}

}  // namespace epload::python
