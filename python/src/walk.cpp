// walk.cpp — _native.walk(): what importlib.metadata.distributions() yields,
// from the index (see walk.hpp).
//
// importlib makes one PathDistribution per metadata directory its Lookup
// takes on each search path, shadowed copies included, and each
// dist.entry_points parses that directory's entry_points.txt.  A complete
// index keeps the same listings (every child Lookup takes, in its order,
// shadowed ones included) and the entry points of every distribution that
// is not shadowed; walk() hands both over in one call.
//
// The index keeps a distribution's entry points grouped: groups in code
// point order, the file's order within a group.  That is the file's own
// order whenever the distribution has entry points in one group only (most
// have).  For one with several, its entry_points.txt is parsed here to learn
// the order of its sections; the rows are kept only if they are the index's
// rows reordered, else importlib reads the file itself.
#include "walk.hpp"

#include <fcntl.h>   // openat, O_PATH
#include <unistd.h>  // read, close

#include <algorithm>  // stable_sort
#include <memory>     // the memo's weak_ptr
#include <span>
#include <cerrno>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "epload/metadata.hpp"  // parse_entry_points
#include "index_hooks.hpp"      // IndexBuilderHooks::listed
#include "query.hpp"
#include "scan_lookup.hpp"      // lookup_key, classify_child

namespace py = pybind11;

namespace epload::python {

namespace {

using detail::IndexBuilderHooks;

/// The child name of `d`'s metadata directory on its search path `sp`, or
/// "" when the directory is not `sp` joined to a child (as the scanner joins).
std::string_view child_in(std::string_view dir, std::string_view sp) {
  if (sp.empty()) return dir.find('/') == std::string_view::npos ? dir : std::string_view{};
  if (!dir.starts_with(sp)) return {};
  dir.remove_prefix(sp.size());
  if (!sp.ends_with('/')) {
    if (!dir.starts_with('/')) return {};
    dir.remove_prefix(1);
  }
  return dir.find('/') == std::string_view::npos ? dir : std::string_view{};
}

/// The whole of `path` (relative to the directory `dir`, or to the current
/// one with AT_FDCWD) into `out`; false when it cannot be read.
bool read_file(int dir, const char* path, std::string& out) {
  const int fd = ::openat(dir, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out.clear();
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return true;
}

/// The str of each group, made once per call (borrowed from the map); keyed
/// by views that outlive it (the index's, never a file's text).
class Groups {
 public:
  Groups() = default;
  Groups(const Groups&) = delete;
  Groups& operator=(const Groups&) = delete;
  ~Groups() {
    for (auto& [k, v] : m_made) Py_DECREF(v);
  }
  PyObject* get(std::string_view g) {
    auto [it, fresh] = m_made.try_emplace(g, nullptr);
    if (fresh) {
      it->second = text(g);
      if (it->second == nullptr) {
        m_made.erase(it);
        return nullptr;
      }
    }
    return it->second;
  }

 private:
  std::unordered_map<std::string_view, PyObject*> m_made;
};

/// O_PATH descriptors of the search paths, opened when first needed, so
/// that a file in a distribution is opened relative to its search path: the
/// kernel then resolves two components, not the whole path (900 files at
/// 6,000 distributions: ~0.5 ms less).  -1: not opened (yet), or it failed
/// (the file is opened by its whole path then).
class SearchPathDirs {
 public:
  explicit SearchPathDirs(std::span<const std::string_view> sps) : m_sps(sps), m_fds(sps.size(), k_unopened) {}
  SearchPathDirs(const SearchPathDirs&) = delete;
  SearchPathDirs& operator=(const SearchPathDirs&) = delete;
  ~SearchPathDirs() {
    for (int fd : m_fds) {
      if (fd >= 0) ::close(fd);
    }
  }
  /// The descriptor of search path `i`, or -1.
  int get(std::size_t i) {
    if (m_fds[i] == k_unopened) {
      const std::string name(m_sps[i].empty() ? std::string_view(".") : m_sps[i]);
      m_fds[i] = name.find('\0') == std::string::npos
                     ? ::open(name.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)
                     : -1;
      if (m_fds[i] < 0) m_fds[i] = -1;
    }
    return m_fds[i];
  }

 private:
  static constexpr int k_unopened = -2;
  std::span<const std::string_view> m_sps;
  std::vector<int> m_fds;
};

/// (name, value, group) of one entry point; new reference or nullptr.
PyObject* row(std::string_view name, std::string_view value, PyObject* group) {
  Ref n(text(name));
  Ref v(text(value));
  if (n.p == nullptr || v.p == nullptr) return nullptr;
  PyObject* t = PyTuple_New(3);
  if (t == nullptr) return nullptr;
  Py_INCREF(group);
  PyTuple_SET_ITEM(t, 0, n.release());
  PyTuple_SET_ITEM(t, 1, v.release());
  PyTuple_SET_ITEM(t, 2, group);
  return t;
}

/// The entry points of one distribution as importlib's parse of its file
/// orders them.  `eps` are its rows in the index (grouped).  New reference;
/// Py_None (new reference) when the order cannot be told from the index
/// alone and the file does not confirm it; nullptr with an error set.
PyObject* dist_rows(const Distribution& d, std::span<const EntryPoint* const> eps, Groups& groups,
                    std::string& scratch, std::vector<ParsedEntry>& parsed, SearchPathDirs& dirs,
                    std::string_view child) {
  bool one_group = true;
  for (const EntryPoint* ep : eps) one_group = one_group && ep->group == eps.front()->group;
  Ref out(PyTuple_New(static_cast<Py_ssize_t>(eps.size())));
  if (out.p == nullptr) return nullptr;
  if (one_group) {
    for (std::size_t i = 0; i < eps.size(); ++i) {
      PyObject* g = groups.get(eps[i]->group);
      PyObject* r = g == nullptr ? nullptr : row(eps[i]->name, eps[i]->value, g);
      if (r == nullptr) return nullptr;
      PyTuple_SET_ITEM(out.p, static_cast<Py_ssize_t>(i), r);
    }
    return out.release();
  }
  // Several groups: the file says in which order its sections come.
  std::string path(d.metadata_dir);
  path.append("/entry_points.txt");
  // `child` is the directory's name in its search path (d.metadata_dir is
  // the two joined): opened relative to that path's descriptor if it has one.
  const int sp_dir = dirs.get(d.search_path);
  std::string rel;
  if (sp_dir >= 0) {
    rel.assign(child);
    rel.append("/entry_points.txt");
  }
  parsed.clear();
  if (!read_file(sp_dir >= 0 ? sp_dir : AT_FDCWD, sp_dir >= 0 ? rel.c_str() : path.c_str(), scratch) ||
      !parse_entry_points(scratch, path, parsed) ||
      parsed.size() != eps.size()) {
    Py_RETURN_NONE;
  }
  std::vector<std::size_t> order(parsed.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return parsed[a].group < parsed[b].group; });
  // The group of each parsed entry as the index holds it: `groups` keys its
  // map by these views, which must outlive this file's text in `scratch`.
  std::vector<std::string_view> group_of(parsed.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const ParsedEntry& p = parsed[order[i]];
    if (p.group != eps[i]->group || p.name != eps[i]->name || p.value != eps[i]->value) Py_RETURN_NONE;
    group_of[order[i]] = eps[i]->group;
  }
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    PyObject* g = groups.get(group_of[i]);
    PyObject* r = g == nullptr ? nullptr : row(parsed[i].name, parsed[i].value, g);
    if (r == nullptr) return nullptr;
    PyTuple_SET_ITEM(out.p, static_cast<Py_ssize_t>(i), r);
  }
  return out.release();
}

/// The listing of an unfiltered walk, kept with the index it was made from:
/// while a query returns that same index (nothing it watches changed), a
/// walk hands the same listing back (its lists are never changed by the
/// Python layer) instead of making it, and reading the files of
/// distributions with several groups, again.  Guarded by the GIL.
struct Memo {
  std::weak_ptr<const Index> index;
  PyObject* listing = nullptr;
};
Memo g_memo;

/// The listing of `index` (see walk()); `key` non-null: only the `info`
/// children whose Lookup key is *key, and every `egg` child.  `rows_too` false:
/// None for every child (importlib reads each file when asked).  New
/// reference, or nullptr with an error set.
PyObject* make_listing(const Index& index, const std::string* key, bool rows_too = true) {
  const auto sps = index.search_paths();
  const auto dists = index.distributions();
  // Each distribution's entry points, grouped as the index keeps them.
  std::vector<std::uint32_t> begin(dists.size() + 1, 0);
  const auto all = index.entry_points();
  for (const EntryPoint& ep : all) ++begin[static_cast<std::size_t>(ep.dist - dists.data()) + 1];
  for (std::size_t i = 1; i < begin.size(); ++i) begin[i] += begin[i - 1];
  std::vector<const EntryPoint*> by_dist(all.size());
  {
    std::vector<std::uint32_t> fill(begin.begin(), begin.end() - 1);
    for (const EntryPoint& ep : all) by_dist[fill[static_cast<std::size_t>(ep.dist - dists.data())]++] = &ep;
  }
  // Where each served distribution is listed.
  std::vector<std::unordered_map<std::string_view, std::uint32_t>> served(sps.size());
  for (std::uint32_t i = 0; i < dists.size(); ++i) {
    const Distribution& d = dists[i];
    if (d.search_path >= sps.size()) continue;
    const std::string_view child = child_in(d.metadata_dir, sps[d.search_path]);
    if (!child.empty()) served[d.search_path].emplace(child, i);
  }
  Ref listing(PyList_New(static_cast<Py_ssize_t>(sps.size())));
  if (listing.p == nullptr) return nullptr;
  for (std::size_t i = 0; i < sps.size(); ++i) {
    PyObject* l = PyList_New(0);
    if (l == nullptr) return nullptr;
    PyList_SET_ITEM(listing.p, static_cast<Py_ssize_t>(i), l);
  }
  Ref empty(PyTuple_New(0));
  if (empty.p == nullptr) return nullptr;
  Groups groups;
  SearchPathDirs dirs(sps);
  std::string scratch, child_key;
  std::vector<ParsedEntry> parsed;
  for (const auto& c : IndexBuilderHooks::listed(index)) {
    if (c.search_path >= sps.size()) continue;
    if (key != nullptr &&
        detail::classify_child(c.rel_path, detail::base_is_egg(sps[c.search_path])) != detail::ChildKind::egg) {
      child_key.clear();
      detail::lookup_key(c.rel_path, child_key);
      if (child_key != *key) continue;
    }
    Ref child(fs_path(c.rel_path));
    if (child.p == nullptr) return nullptr;
    Ref rows;
    const auto& m = served[c.search_path];
    const auto it = m.find(c.rel_path);
    if (it == m.end() || !rows_too) {
      rows.p = Py_NewRef(Py_None);
    } else if (begin[it->second] == begin[it->second + 1]) {
      rows.p = Py_NewRef(empty.p);
    } else {
      const std::span<const EntryPoint* const> eps(by_dist.data() + begin[it->second],
                                                   begin[it->second + 1] - begin[it->second]);
      rows.p = dist_rows(dists[it->second], eps, groups, scratch, parsed, dirs, c.rel_path);
      if (rows.p == nullptr) return nullptr;
    }
    Ref pair(PyTuple_Pack(2, child.p, rows.p));
    if (pair.p == nullptr ||
        PyList_Append(PyList_GET_ITEM(listing.p, static_cast<Py_ssize_t>(c.search_path)), pair.p) != 0) {
      return nullptr;
    }
  }
  return listing.release();
}

/// walk(paths, validation, cache_dir, use_cache, interpreter, key=None)
/// Returns (status, reason, cache_file, problem, listing): `problem` as
/// query()'s; `listing` holds, per search path, a list of (child, rows) in
/// importlib's Lookup order: `rows` a tuple of (name, value, group) in
/// entry_points.txt's order, or None where importlib must read the file (a
/// shadowed copy).  `key` (a Prepared.normalized name): only the
/// `*.dist-info`/`*.egg-info` children Lookup files under it, and every
/// `EGG-INFO` of a `.egg` path (the caller compares those); under `full`,
/// while the index of a walk is held (listing_query()), every `rows` None.
py::object walk(py::list paths, const std::string& validation, const std::string& cache_dir, bool use_cache,
                py::bytes interpreter, py::object key) {
  auto usable = [](const Index& index) { return index.complete() && IndexBuilderHooks::listed_known(index); };
  const bool whole = key.is_none();
  std::string wanted;
  if (!whole) wanted = key.cast<std::string>();
  if (!whole && validation == "full") {
    // A lookup by name after a walk: which children it yields depends on
    // the listings alone, which the search paths' stamps vouch for; the
    // rows would depend on the watched files too, so they are left to
    // importlib (read when asked, as its own objects do), and the `full`
    // check of every watched file is not needed for this answer.
    QueryAnswer a = listing_query(paths, cache_dir, use_cache, interpreter);
    if (a.index && usable(*a.index)) {
      PyObject* listing = make_listing(*a.index, &wanted, false);
      if (listing == nullptr) throw py::error_already_set();
      return py::make_tuple(a.status, a.reason, a.file, py::none(), py::reinterpret_steal<py::object>(listing));
    }
  }
  // On a cache hit under `full`, the listing is made while the stat calls
  // run on the other CPU (cache_overlap.hpp), kept only if that index is
  // the answer.
  py::object made;
  std::shared_ptr<const Index> made_for;
  const WhileValidating make_early = [&](const std::shared_ptr<const Index>& candidate) {
    if (!usable(*candidate)) return;
    py::gil_scoped_acquire gil;
    if (whole && g_memo.listing != nullptr && g_memo.index.lock() == candidate) return;
    PyObject* listing = make_listing(*candidate, whole ? nullptr : &wanted);
    if (listing == nullptr) {
      PyErr_Clear();  // made again below, where an error is raised
      return;
    }
    made = py::reinterpret_steal<py::object>(listing);
    made_for = candidate;
  };
  QueryAnswer a = run_query(paths, nullptr, validation, cache_dir, use_cache, interpreter, make_early);
  if (!a.index) return py::make_tuple(a.status, a.reason, a.file, a.problem, py::none());
  if (!usable(*a.index)) {
    return py::make_tuple(a.status, a.reason, a.file,
                          py::make_tuple("unsupported", "the index holds no listing of the search paths"),
                          py::none());
  }
  if (whole && g_memo.listing != nullptr && g_memo.index.lock() == a.index) {
    return py::make_tuple(a.status, a.reason, a.file, py::none(),
                          py::reinterpret_borrow<py::object>(g_memo.listing));
  }
  py::object out = made_for == a.index ? made : py::object();
  if (!out) {
    PyObject* listing = make_listing(*a.index, whole ? nullptr : &wanted);
    if (listing == nullptr) throw py::error_already_set();
    out = py::reinterpret_steal<py::object>(listing);
  }
  PyObject* listing = out.ptr();
  if (whole) {
    Py_XDECREF(g_memo.listing);
    g_memo.listing = Py_NewRef(listing);
    g_memo.index = a.index;
  }
  return py::make_tuple(a.status, a.reason, a.file, py::none(), out);
}

}  // namespace

void register_walk(py::module_& m) {
  m.def("walk", &walk, py::arg("paths"), py::arg("validation"), py::arg("cache_dir"), py::arg("use_cache"),
        py::arg("interpreter"), py::arg("key") = py::none(),
        "(status, reason, cache_file, problem, listing): per search path, the metadata directories "
        "importlib.metadata.distributions() finds there, each with its entry points or None.");
}

}  // namespace epload::python
