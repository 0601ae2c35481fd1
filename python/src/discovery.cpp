// discovery.cpp — the lazy autoload's discovery without a Python object per
// backend.
//
// At `import host` a lazy autoload needs, per backend, only whether its
// devices are known and which backends provide which device; everything
// else (names, values, distributions) is needed only for the few backends
// that get loaded, listed or looked up.  _native.query() converts every
// selected entry point and distribution to tuples (~8 objects per backend),
// and matching them against the learned-device store made a tuple of
// devices, an int and a list entry per backend more: at 1,000 backends
// ~12,000 objects, whose fresh memory alone (~270 first-touch page faults)
// cost more than the rest of the discovery.  A Discovery keeps the index
// (shared with its Catalog) and the parsed store instead, matches them in
// C++ (no allocation per backend), and makes a Python object only when asked
// for one row, one distribution, one backend's devices or one device's
// providers.
//
// The Python layer takes this path only in the common case (lazy mode, a
// host, absolute search paths, no declared devices, a usable store and a
// stamp for every backend); otherwise it asks export() for the same tuples
// query() gives and runs its own loop, which stays the reference the tests
// compare this one against.
#include "discovery.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "epload/metadata.hpp"  // find_invalid_utf8
#include "epload/profile.hpp"
#include "query.hpp"
#include "store.hpp"

namespace py = pybind11;

namespace epload::python {

namespace {

py::object steal(PyObject* o) {
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

class Discovery {
 public:
  /// `parts`: the autoload group's entry points first, then the groups
  /// declaring devices.
  /// `cwd`: the current directory when a search path is relative (its
  /// metadata directories are then joined to it, as os.path.join does).
  Discovery(std::shared_ptr<const Index> index, std::vector<std::span<const EntryPoint>> parts,
            std::string cwd)
      : m_index(std::move(index)), m_parts(std::move(parts)), m_cwd(std::move(cwd)) {
    m_stamps = entry_points_stamps(*m_index, m_parts);
    const auto rows = m_parts.front();
    m_row_dist.reserve(rows.size());
    std::unordered_map<const Distribution*, std::uint32_t> pos;
    pos.reserve(rows.size());
    for (const EntryPoint& ep : rows) {
      auto [it, fresh] = pos.try_emplace(ep.dist, static_cast<std::uint32_t>(m_dists.size()));
      if (fresh) m_dists.push_back(ep.dist);
      m_row_dist.push_back(it->second);
    }
  }

  std::size_t count() const { return m_parts.front().size(); }

  std::size_t declared() const {
    std::size_t n = 0;
    for (std::size_t i = 1; i < m_parts.size(); ++i) n += m_parts[i].size();
    return n;
  }

  /// What _native.query() returns for the same groups with stamps (the
  /// metadata directories made absolute, as _entry_points._query does).
  py::object export_rows() const { return steal(convert(m_parts, &m_stamps, m_cwd)); }

  /// Matches the rows against the store at `path`: None when the store is
  /// not usable (read_store() would return None); (header, None) when its
  /// "backends" is not an object; else (header, (unknown, at_start,
  /// restat)) as _native.match_store() gives them, the devices kept here.
  py::object match(const std::string& path) {
    epload::profile::Span span(epload::profile::Phase::total, "learned devices match");
    m_known.assign(count(), {});
    m_by_device.clear();
    m_store = std::make_unique<LearnedStore>();
    if (!m_store->open(path)) return py::none();
    if (!m_store->has_backends()) return py::make_tuple(m_store->header(), py::none());
    py::list unknown, at_start, restat;
    const auto rows = m_parts.front();
    std::string key;
    char buf[k_stamp_chars];
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const EntryPoint& ep = rows[i];
      const FileStamp* st = stamp_of(ep.dist);
      if (st == nullptr) {
        restat.append(i);
        continue;
      }
      LearnedStore::Entry e;
      key.assign(ep.name).append(1, '\x1f').append(ep.value).append(1, '\x1f');
      const std::size_t dir_at = key.size();
      append_dir(key, m_cwd, ep.dist->metadata_dir);
      // A path that is not UTF-8 becomes a str no store key can equal.
      if (find_invalid_utf8(std::string_view(key).substr(dir_at)) == std::string_view::npos) {
        e = m_store->find(key);
        if (e.count != 0 && m_store->string(e, 0) != format_stamp(*st, buf)) e = {};
      }
      if (e.count == 0) {
        unknown.append(i);
        at_start.append(i);
        continue;
      }
      m_known[i] = e;
      if (e.count == 1) at_start.append(i);  // a hook: no device learned
      for (std::uint32_t k = 1; k < e.count; ++k) {
        m_by_device.push_back({m_store->string(e, k), static_cast<std::uint32_t>(i)});
      }
    }
    std::stable_sort(m_by_device.begin(), m_by_device.end(), ByDevice::less);
    return py::make_tuple(m_store->header(), py::make_tuple(unknown, at_start, restat));
  }

  /// Row `i`: (name, value, group, dist position).
  py::object row(std::size_t i) const {
    const EntryPoint& ep = at(i);
    return steal(Py_BuildValue("(NNNI)", text(ep.name), text(ep.value), text(ep.group),
                               static_cast<unsigned>(m_row_dist[i])));
  }

  /// Distribution `pos`: (name, version, metadata_dir, stamp).
  py::object dist(std::size_t pos) const {
    if (pos >= m_dists.size()) throw py::index_error("distribution position out of range");
    const Distribution& d = *m_dists[pos];
    char buf[k_stamp_chars];
    const FileStamp* st = stamp_of(&d);
    const std::string_view stamp = st != nullptr ? format_stamp(*st, buf) : std::string_view();
    std::string dir;
    append_dir(dir, m_cwd, d.metadata_dir);
    return steal(Py_BuildValue("(NNNN)", text(d.name), text(d.version), fs_path(dir),
                               fs_path(stamp)));
  }

  /// The devices learned for row `i` (a tuple; () for a hook), or None.
  py::object known(std::size_t i) const {
    at(i);
    if (m_known.empty() || m_known[i].count == 0) return py::none();
    const LearnedStore::Entry e = m_known[i];
    py::tuple t(e.count - 1);
    for (std::uint32_t k = 1; k < e.count; ++k) t[k - 1] = steal(text(m_store->string(e, k)));
    return t;
  }

  /// The rows providing `device`, in order (a new list), or None.
  py::object candidates(py::handle device) const {
    std::string_view name;
    if (!PyUnicode_Check(device.ptr()) || !utf8_of(device.ptr(), name)) return py::none();
    auto [lo, hi] = std::equal_range(m_by_device.begin(), m_by_device.end(), ByDevice{name, 0}, ByDevice::less);
    if (lo == hi) return py::none();
    py::list out;
    for (auto it = lo; it != hi; ++it) out.append(it->row);
    return out;
  }

  /// Every device with a provider, in order of first appearance.
  py::list device_names() const {
    py::list out;
    std::unordered_set<std::string_view> seen;
    for (const LearnedStore::Entry& e : m_known) {
      for (std::uint32_t k = 1; k < e.count; ++k) {
        const std::string_view d = m_store->string(e, k);
        if (seen.insert(d).second) out.append(steal(text(d)));
      }
    }
    return out;
  }

  /// The first row named `name`, or None.
  py::object index_of(py::handle name) const {
    std::string_view want;
    if (!PyUnicode_Check(name.ptr()) || !utf8_of(name.ptr(), want)) return py::none();
    const auto rows = m_parts.front();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].name == want) return py::int_(i);
    }
    return py::none();
  }

 private:
  struct ByDevice {
    std::string_view device;
    std::uint32_t row;
    static bool less(const ByDevice& a, const ByDevice& b) { return a.device < b.device; }
  };

  const EntryPoint& at(std::size_t i) const {
    if (i >= count()) throw py::index_error("backend index out of range");
    return m_parts.front()[i];
  }

  const FileStamp* stamp_of(const Distribution* d) const {
    auto it = m_stamps.find(d);
    return it == m_stamps.end() ? nullptr : it->second;
  }

  std::shared_ptr<const Index> m_index;
  std::vector<std::span<const EntryPoint>> m_parts;
  std::string m_cwd;
  StampFiles m_stamps;
  std::vector<const Distribution*> m_dists;  ///< by position, in order of first use
  std::vector<std::uint32_t> m_row_dist;     ///< row -> position
  std::unique_ptr<LearnedStore> m_store;     ///< set by match()
  std::vector<LearnedStore::Entry> m_known;  ///< by row; count 0: unknown
  std::vector<ByDevice> m_by_device;         ///< sorted by device, rows in order
};

/// discover(paths, groups, validation, cache_dir, use_cache, interpreter, cwd)
/// -> (status, reason, cache_file, problem, Discovery or None): query()'s
/// arguments (`groups` a tuple: the autoload group, then the declaring
/// groups; `cwd` the current directory's bytes when a path is relative, else
/// b"") and outcome, the entry points kept native.
py::object discover(py::list paths, py::tuple groups, const std::string& validation,
                    const std::string& cache_dir, bool use_cache, py::bytes interpreter,
                    py::bytes cwd) {
  epload::profile::Span span(epload::profile::Phase::total, "entry_points query");
  std::vector<std::string> wanted;
  for (py::handle g : groups) wanted.push_back(g.cast<std::string>());
  if (wanted.empty()) throw py::value_error("discover() needs the autoload group");
  QueryAnswer a = run_query(paths, &wanted, validation, cache_dir, use_cache, interpreter, true);
  if (!a.index) return py::make_tuple(a.status, a.reason, a.file, a.problem, py::none());
  std::vector<std::span<const EntryPoint>> parts;
  for (const std::string& g : wanted) parts.push_back(a.index->group(g));
  auto d = std::make_unique<Discovery>(a.index, std::move(parts), std::string(cwd));
  return py::make_tuple(a.status, a.reason, a.file, py::none(), py::cast(std::move(d)));
}

}  // namespace

void register_discovery(py::module_& m) {
  py::class_<Discovery>(m, "Discovery",
                        "An autoload group's entry points and learned devices, kept native.")
      .def_property_readonly("count", &Discovery::count)
      .def_property_readonly("declared", &Discovery::declared)
      .def("export", &Discovery::export_rows)
      .def("match", &Discovery::match, py::arg("store_path"))
      .def("row", &Discovery::row)
      .def("dist", &Discovery::dist)
      .def("known", &Discovery::known)
      .def("candidates", &Discovery::candidates)
      .def("device_names", &Discovery::device_names)
      .def("index_of", &Discovery::index_of);
  m.def("discover", &discover, py::arg("paths"), py::arg("groups"), py::arg("validation"),
        py::arg("cache_dir"), py::arg("use_cache"), py::arg("interpreter"), py::arg("cwd"),
        "query() for the lazy autoload: the rows stay native (see Discovery).");
}

}  // namespace epload::python
