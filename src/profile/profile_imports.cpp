// profile_imports.cpp — see profile_imports.hpp.
//
// Per (pid, tid), spans sorted by start (the longest first on ties) and a
// stack of the open spans of every phase give each import its innermost
// enclosing import (whose self time it reduces) and its innermost enclosing
// backend `load` (whose imports it counts; an import directly inside the
// load, with no import between them, is one the load caused directly).
#include "profile_imports.hpp"

#include <algorithm>  // sort
#include <map>        // per thread, per module, per backend


namespace epload::profile {

namespace {

struct Open {
  const Event* e;
  std::int64_t import_children = 0;  // durations of the imports whose nearest enclosing import this is
};

bool holds(const Event& outer, const Event& inner) {
  return inner.start_ns >= outer.start_ns && inner.start_ns + inner.dur_ns <= outer.start_ns + outer.dur_ns;
}

class Collector {
 public:
  void add_thread(std::vector<const Event*>& list) {
    std::stable_sort(list.begin(), list.end(), [](const Event* a, const Event* b) {
      return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->dur_ns > b->dur_ns;
    });
    std::vector<Open> stack;
    for (const Event* e : list) {
      while (!stack.empty() && !holds(*stack.back().e, *e)) pop(stack);
      if (e->phase == Phase::module_import) add_import(stack, *e);
      stack.push_back({e, 0});
    }
    while (!stack.empty()) pop(stack);
  }

  ImportSummary finish() {
    ImportSummary s;
    for (auto& [pid, p] : m_processes) {
      s.modules += p.modules;
      s.processes.push_back(p);
    }
    for (auto& [name, t] : m_modules) s.by_self.push_back(t);
    s.by_cumulative = s.by_self;
    std::stable_sort(s.by_self.begin(), s.by_self.end(),
                     [](const ImportTotal& a, const ImportTotal& b) { return a.self_ns > b.self_ns; });
    std::stable_sort(s.by_cumulative.begin(), s.by_cumulative.end(),
                     [](const ImportTotal& a, const ImportTotal& b) { return a.cumulative_ns > b.cumulative_ns; });
    for (auto& [name, b] : m_backends) {
      std::vector<ImportTotal> direct;
      for (auto& [module, t] : m_direct[name]) direct.push_back(t);
      std::stable_sort(direct.begin(), direct.end(),
                       [](const ImportTotal& x, const ImportTotal& y) { return x.cumulative_ns > y.cumulative_ns; });
      b.direct = std::move(direct);
      s.backends.push_back(std::move(b));
    }
    std::stable_sort(s.backends.begin(), s.backends.end(),
                     [](const BackendImports& a, const BackendImports& b) { return a.ns > b.ns; });
    return s;
  }

 private:
  void pop(std::vector<Open>& stack) {
    const Open& o = stack.back();
    if (o.e->phase == Phase::module_import) {
      m_modules[o.e->subject].self_ns += std::max<std::int64_t>(0, o.e->dur_ns - o.import_children);
    }
    stack.pop_back();
  }

  void add_import(std::vector<Open>& stack, const Event& e) {
    ImportTotal& t = m_modules[e.subject];
    t.module = e.subject;
    ++t.count;
    // An import of a submodule imports its parent first, and the parent may
    // import that submodule itself: the same module's span inside its own
    // (-X importtime shows both too).  Its time is in the outer one already.
    const bool again = std::any_of(stack.begin(), stack.end(), [&](const Open& o) {
      return o.e->phase == Phase::module_import && o.e->subject == e.subject;
    });
    if (!again) t.cumulative_ns += e.dur_ns;
    ProcessImports& p = m_processes[e.pid];
    p.pid = e.pid;
    ++p.modules;
    // The innermost enclosing import takes this one out of its self time;
    // the innermost enclosing backend load counts it, as caused directly
    // when no import lies between them.
    bool inside_import = false, load_seen = false;
    for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
      if (it->e->phase == Phase::module_import) {
        if (!inside_import) it->import_children += e.dur_ns;
        inside_import = true;
      } else if (it->e->phase == Phase::load && !it->e->subject.empty() && !load_seen) {
        load_seen = true;
        BackendImports& b = m_backends[it->e->subject];
        b.backend = it->e->subject;
        ++b.modules;
        if (!inside_import) {
          b.ns += e.dur_ns;
          ImportTotal& d = m_direct[it->e->subject][e.subject];
          d.module = e.subject;
          ++d.count;
          d.cumulative_ns += e.dur_ns;
        }
      }
      if (inside_import && load_seen) break;
    }
    if (!inside_import) p.ns += e.dur_ns;
  }

  std::map<std::string, ImportTotal> m_modules;
  std::map<std::int32_t, ProcessImports> m_processes;
  std::map<std::string, BackendImports> m_backends;
  std::map<std::string, std::map<std::string, ImportTotal>> m_direct;
};

}  // namespace

ImportSummary summarize_imports(const std::vector<Event>& events) {
  std::map<std::pair<std::int32_t, std::uint32_t>, std::vector<const Event*>> threads;
  bool any = false;
  for (const Event& e : events) {
    threads[{e.pid, e.tid}].push_back(&e);
    any = any || e.phase == Phase::module_import;
  }
  if (!any) return {};
  Collector c;
  for (auto& [key, list] : threads) c.add_thread(list);
  return c.finish();
}

}  // namespace epload::profile
