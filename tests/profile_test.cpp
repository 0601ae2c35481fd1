// profile_test.cpp — the profiler: spans and counters recorded by the real
// scanner, cache and loader; trace files written, read back and validated
// (fields, nesting, one `load` event per loaded backend); summaries; bad
// trace files.  Real directories, real backend libraries, real dlopen.
#include "epload/profile.hpp"
#include "profile_imports.hpp"  // import summaries
#include "profile_trace.hpp"    // reading, merging, summaries

#include <gtest/gtest.h>
#include <sys/stat.h>  // mkfifo
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend_env.hpp"
#include "epload/cache.hpp"
#include "epload/loader.hpp"
#include "epload/scanner.hpp"
#include "profile_internal.hpp"

namespace epload {
namespace {

namespace prof = epload::profile;
using testing::BackendEnv;

// Every test starts and ends with the profiler off and empty, so that no
// other test in this binary (the loader's allocation-free checks) runs with
// it on.
class Profile : public ::testing::Test {
 protected:
  void SetUp() override { prof::reset(); }
  void TearDown() override { prof::reset(); }

  std::string temp_file(const std::string& name) {
    if (m_dir.empty()) {
      char tmpl[] = "/tmp/epload-profile-test-XXXXXX";
      if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
      m_dir = tmpl;
    }
    return m_dir + "/" + name;
  }
  ~Profile() override {
    if (!m_dir.empty()) {
      const std::string cmd = "rm -rf '" + m_dir + "'";
      if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "cannot remove %s\n", m_dir.c_str());
    }
  }

 private:
  std::string m_dir;
};

std::vector<prof::Event> of_phase(const std::vector<prof::Event>& evs, prof::Phase p) {
  std::vector<prof::Event> out;
  for (const auto& e : evs) {
    if (e.phase == p) out.push_back(e);
  }
  return out;
}

bool inside(const prof::Event& child, const prof::Event& parent) {
  return child.pid == parent.pid && child.tid == parent.tid && child.start_ns >= parent.start_ns &&
         child.start_ns + child.dur_ns <= parent.start_ns + parent.dur_ns;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

TEST_F(Profile, OffRecordsNothing) {
  EXPECT_FALSE(prof::enabled());
  { prof::Span s(prof::Phase::scan, "x"); }
  prof::count(prof::Counter::stat, 5);
  prof::record(prof::Phase::py_import, "y", prof::now_ns(), 10);
  EXPECT_TRUE(prof::events().empty());
  EXPECT_EQ(prof::counter(prof::Counter::stat), 0u);
}

TEST_F(Profile, PhaseNamesRoundTrip) {
  for (int k = 0; k < prof::k_phase_count; ++k) {
    const auto p = static_cast<prof::Phase>(k);
    ASSERT_EQ(prof::parse_phase(prof::phase_name(p)), p) << prof::phase_name(p);
  }
  EXPECT_FALSE(prof::parse_phase("nosuch").has_value());
}

TEST_F(Profile, SpansNestPerThreadAndSurviveAWriteAndRead) {
  prof::enable();
  {
    prof::Span outer(prof::Phase::total, "outer");
    { prof::Span inner(prof::Phase::read, "file \"quoted\"\n"); }
    std::thread t([] { prof::Span other(prof::Phase::parse, "other thread"); });
    t.join();
    prof::count(prof::Counter::open, 3);
  }
  const std::int64_t t0 = prof::now_ns();
  prof::record(prof::Phase::py_import, "pybackend", t0, 1500);

  const std::string file = temp_file("trace.json");
  std::string error;
  ASSERT_TRUE(prof::write_trace(file, &error)) << error;
  auto read = prof::read_trace(file);
  ASSERT_TRUE(read.ok()) << read.error().message;
  const auto& evs = read->events;
  ASSERT_EQ(evs.size(), 4u);
  EXPECT_EQ(read->counters[static_cast<int>(prof::Counter::open)], 3u);
  ASSERT_EQ(read->pids.size(), 1u);
  EXPECT_EQ(read->pids[0], static_cast<std::int32_t>(::getpid()));

  const auto outer = of_phase(evs, prof::Phase::total);
  const auto inner = of_phase(evs, prof::Phase::read);
  const auto other = of_phase(evs, prof::Phase::parse);
  const auto py = of_phase(evs, prof::Phase::py_import);
  ASSERT_EQ(outer.size(), 1u);
  ASSERT_EQ(inner.size(), 1u);
  ASSERT_EQ(other.size(), 1u);
  ASSERT_EQ(py.size(), 1u);
  EXPECT_EQ(inner[0].subject, "file \"quoted\"\n");  // escaped and decoded exactly
  EXPECT_TRUE(inside(inner[0], outer[0]));
  EXPECT_NE(other[0].tid, outer[0].tid);  // the other thread has its own lane
  EXPECT_EQ(py[0].dur_ns, 1500);
  EXPECT_EQ(py[0].start_ns, t0);  // nanoseconds survive the µs text
}

TEST_F(Profile, ImportsSelfCumulativeAndTheBackendLoadThatCausedThem) {
  // pid 7: import torch [0, 100) > import torch._C [5, 25), total "import torch"
  // [30, 90) > load be [40, 80) > py_import be [41, 79) > import be [42, 70)
  // > import be.ops [50, 60).  pid 8 imports torch too [0, 40) (another thread
  // number, another process).
  auto ev = [](prof::Phase p, std::string d, std::int64_t s, std::int64_t e, std::int32_t pid = 7) {
    return prof::Event{p, std::move(d), s, e - s, 1, pid};
  };
  using P = prof::Phase;
  const std::vector<prof::Event> evs = {
      ev(P::module_import, "torch", 0, 100),  ev(P::module_import, "torch._C", 5, 25),
      ev(P::total, "import torch", 30, 90),   ev(P::load, "be", 40, 80),
      ev(P::py_import, "be", 41, 79),         ev(P::module_import, "be", 42, 70),
      ev(P::module_import, "be.ops", 50, 60), ev(P::module_import, "torch", 0, 40, 8)};
  const prof::ImportSummary s = prof::summarize_imports(evs);
  EXPECT_EQ(s.modules, 5u);
  std::map<std::string, prof::ImportTotal> by;
  for (const auto& t : s.by_self) by[t.module] = t;
  // torch's self: pid 7's 100 - 20 (torch._C) - 28 (be, nested in it through
  // epload's spans), plus pid 8's whole 40.
  EXPECT_EQ(by["torch"].self_ns, 52 + 40);
  EXPECT_EQ(by["torch"].cumulative_ns, 140);
  EXPECT_EQ(by["torch"].count, 2u);
  EXPECT_EQ(by["be"].self_ns, 18);
  EXPECT_EQ(by["be.ops"].self_ns, 10);
  EXPECT_EQ(s.by_self.front().module, "torch");
  EXPECT_EQ(s.by_cumulative.front().module, "torch");
  EXPECT_EQ(s.by_cumulative.back().module, "be.ops");
  ASSERT_EQ(s.processes.size(), 2u);
  EXPECT_EQ(s.processes[0].pid, 7);
  EXPECT_EQ(s.processes[0].modules, 4u);
  EXPECT_EQ(s.processes[0].ns, 100);  // the outermost import only
  ASSERT_EQ(s.backends.size(), 1u);
  EXPECT_EQ(s.backends[0].backend, "be");
  EXPECT_EQ(s.backends[0].modules, 2u);  // be and be.ops
  EXPECT_EQ(s.backends[0].ns, 28);       // be alone is direct
  ASSERT_EQ(s.backends[0].direct.size(), 1u);
  EXPECT_EQ(s.backends[0].direct[0].module, "be");
  // A module imported inside its own import (its parent imports it first):
  // counted twice, its time once.
  const prof::ImportSummary again = prof::summarize_imports(
      {ev(P::module_import, "a.b", 0, 100), ev(P::module_import, "a", 1, 90), ev(P::module_import, "a.b", 10, 50)});
  std::map<std::string, prof::ImportTotal> by_again;
  for (const auto& t : again.by_self) by_again[t.module] = t;
  EXPECT_EQ(by_again["a.b"].count, 2u);
  EXPECT_EQ(by_again["a.b"].cumulative_ns, 100);
  EXPECT_EQ(by_again["a.b"].self_ns, 11 + 40);
  EXPECT_EQ(by_again["a"].self_ns, 89 - 40);
  // No import spans: an empty summary.
  EXPECT_EQ(prof::summarize_imports({ev(P::total, "x", 0, 5)}).modules, 0u);
}

TEST_F(Profile, ImportPhaseRoundTripsThroughATraceFile) {
  prof::enable();
  prof::record(prof::Phase::module_import, "json.decoder", 1000, 500);
  prof::record_for(77, prof::Phase::module_import, "on.another.thread", 2000, 10);
  const std::string path = ::testing::TempDir() + "import_trace.json";
  ASSERT_TRUE(prof::write_trace(path));
  auto t = prof::read_trace(path);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->events.size(), 2u);
  EXPECT_EQ(t->events[0].phase, prof::Phase::module_import);
  EXPECT_EQ(t->events[0].subject, "json.decoder");
  EXPECT_STREQ(prof::phase_name(prof::Phase::module_import), "import");
  EXPECT_NE(t->events[0].tid, t->events[1].tid);  // the keyed thread has its own number
  ::unlink(path.c_str());
}

TEST_F(Profile, SummarySelfTimeSubtractsDirectChildren) {
  // total [0, 100) > scan [10, 60) > read [20, 30), read [30, 50); load [70, 95) > dlopen, init
  auto ev = [](prof::Phase p, std::string d, std::int64_t s, std::int64_t e) {
    return prof::Event{p, std::move(d), s, e - s, 1, 7};
  };
  std::vector<prof::Event> evs = {
      ev(prof::Phase::total, "cmd", 0, 100),       ev(prof::Phase::scan, "", 10, 60),
      ev(prof::Phase::read, "a", 20, 30),          ev(prof::Phase::read, "b", 30, 50),
      ev(prof::Phase::load, "be", 70, 95),         ev(prof::Phase::dlopen, "be", 71, 80),
      ev(prof::Phase::init, "be", 80, 90),         ev(prof::Phase::total, "nested total", 1, 5),
      ev(prof::Phase::resolve, "unloaded", 96, 99)};
  const prof::Summary s = prof::summarize(evs);
  std::map<prof::Phase, prof::PhaseTotal> by;
  for (const auto& p : s.phases) by[p.phase] = p;
  EXPECT_EQ(by[prof::Phase::scan].self_ns, 20);
  EXPECT_EQ(by[prof::Phase::scan].total_ns, 50);
  EXPECT_EQ(by[prof::Phase::read].self_ns, 30);
  EXPECT_EQ(by[prof::Phase::read].count, 2u);
  EXPECT_EQ(by[prof::Phase::load].self_ns, 6);
  EXPECT_EQ(by[prof::Phase::total].count, 2u);
  EXPECT_EQ(by[prof::Phase::total].total_ns, 100);  // the nested total counted once
  EXPECT_EQ(by[prof::Phase::total].self_ns, 100 - 50 - 25 - 4 - 3 + 4);
  EXPECT_EQ(s.wall_ns, 100);
  ASSERT_EQ(s.backends.size(), 1u);  // only backends with a load span
  EXPECT_EQ(s.backends[0].name, "be");
  EXPECT_EQ(s.backends[0].load_ns, 25);
  EXPECT_EQ(s.backends[0].dlopen_ns, 9);
  EXPECT_EQ(s.backends[0].init_ns, 10);
  EXPECT_EQ(s.phases.front().phase, prof::Phase::read);  // costliest self time first
}

TEST_F(Profile, ScanRecordsReadAndParsePerFileAndCountsSystemCalls) {
  BackendEnv env;
  env.add("alpha", "alpha", "");
  env.add("beta", "beta", "");
  for (const char* d : {"alpha", "beta"}) {
    testing::write_file(env.site() + "/" + d + "-1.0.dist-info/entry_points.txt",
                        std::string("[torch.backends]\n") + d + " = " + d + "._native:tb_init\n");
  }
  prof::enable();
  auto index = scan(std::vector<std::string>{env.site()});
  ASSERT_TRUE(index.ok()) << index.error().message;
  const auto evs = prof::events();
  const auto scans = of_phase(evs, prof::Phase::scan);
  ASSERT_EQ(scans.size(), 1u);
  std::set<std::string> read_files, parsed_files;
  for (const auto& e : of_phase(evs, prof::Phase::read)) {
    EXPECT_TRUE(inside(e, scans[0]) || e.tid != scans[0].tid) << e.subject;
    read_files.insert(e.subject);
  }
  for (const auto& e : of_phase(evs, prof::Phase::parse)) parsed_files.insert(e.subject);
  // METADATA too: a distribution with entry points is named by it.
  EXPECT_EQ(read_files, (std::set<std::string>{"alpha-1.0.dist-info/entry_points.txt", "alpha-1.0.dist-info/METADATA",
                                              "beta-1.0.dist-info/entry_points.txt", "beta-1.0.dist-info/METADATA"}));
  EXPECT_EQ(parsed_files, (std::set<std::string>{"alpha-1.0.dist-info/entry_points.txt",
                                                "beta-1.0.dist-info/entry_points.txt"}));
  EXPECT_GE(prof::counter(prof::Counter::open), 3u);  // the search path and two files
  EXPECT_GE(prof::counter(prof::Counter::read), 2u);
  EXPECT_GE(prof::counter(prof::Counter::readdir), 1u);
}

TEST_F(Profile, CacheHitRecordsKeyValidationReadAndParse) {
  BackendEnv env;
  env.add("alpha", "alpha", "");
  testing::write_file(env.site() + "/alpha-1.0.dist-info/entry_points.txt",
                      "[torch.backends]\nalpha = alpha._native:tb_init\n");
  CacheOptions o;
  o.search_paths = {env.site()};
  o.cache_dir = env.cache_dir();
  CacheReport report;
  for (int k = 0; k < 50 && report.status != CacheStatus::hit; ++k) {
    testing::let_clock_tick();
    ASSERT_TRUE(open_index(o, &report).ok());
  }
  ASSERT_EQ(report.status, CacheStatus::hit) << report.reason;
  prof::enable();
  ASSERT_TRUE(open_index(o, &report).ok());
  ASSERT_EQ(report.status, CacheStatus::hit);
  const auto evs = prof::events();
  EXPECT_EQ(of_phase(evs, prof::Phase::cache_key).size(), 1u);
  const auto stat = of_phase(evs, prof::Phase::stat);
  ASSERT_EQ(stat.size(), 1u);
  EXPECT_EQ(stat[0].subject, "validate full");
  ASSERT_EQ(of_phase(evs, prof::Phase::read).size(), 1u);
  EXPECT_EQ(of_phase(evs, prof::Phase::read)[0].subject, report.file);
  EXPECT_EQ(of_phase(evs, prof::Phase::parse).size(), 1u);
  EXPECT_TRUE(of_phase(evs, prof::Phase::scan).empty());
  // One stat for the search path and one per watched file, at least.
  EXPECT_GE(prof::counter(prof::Counter::stat), 2u);
}

TEST_F(Profile, LoaderRecordsOneLoadSpanPerLoadedBackend) {
  BackendEnv env;
  env.add("alpha", "alpha", "tb_undeclared");
  env.add("beta", "beta", "tb_npu");
  env.add("gamma", "gamma", "tb_fixed");
  LoaderOptions o;
  o.cache_dir = env.cache_dir();
  prof::enable();
  auto loader = Loader::create(env.index(), o);
  ASSERT_TRUE(loader.ok()) << loader.error().message;
  (*loader)->start();
  ASSERT_TRUE((*loader)->lookup("tnpu").ok());

  const std::string file = temp_file("loader.json");
  std::string error;
  ASSERT_TRUE(prof::write_trace(file, &error)) << error;
  auto t = prof::read_trace(file);
  ASSERT_TRUE(t.ok()) << t.error().message;
  std::vector<std::string> loaded;
  for (std::size_t k : (*loader)->load_order()) loaded.push_back((*loader)->backends()[k].name);
  std::vector<std::string> traced;
  for (const auto& e : of_phase(t->events, prof::Phase::load)) traced.push_back(e.subject);
  EXPECT_EQ(traced, loaded);
  EXPECT_EQ(loaded, (std::vector<std::string>{"beta"}));  // tnpu is declared: only beta loads
  const auto load = of_phase(t->events, prof::Phase::load)[0];
  for (prof::Phase p : {prof::Phase::dlopen, prof::Phase::init}) {
    const auto evs = of_phase(t->events, p);
    ASSERT_EQ(evs.size(), 1u) << prof::phase_name(p);
    EXPECT_EQ(evs[0].subject, "beta");
    EXPECT_TRUE(inside(evs[0], load)) << prof::phase_name(p);
  }
  // Resolved at create (no store yet): one resolve span per backend.
  std::set<std::string> resolved;
  for (const auto& e : of_phase(t->events, prof::Phase::resolve)) resolved.insert(e.subject);
  EXPECT_EQ(resolved, (std::set<std::string>{"alpha", "beta", "gamma"}));
  const prof::Summary s = prof::summarize(t->events);
  ASSERT_EQ(s.backends.size(), 1u);
  EXPECT_EQ(s.backends[0].name, "beta");
  EXPECT_GT(s.backends[0].dlopen_ns, 0);
}

TEST_F(Profile, MergeKeepsEveryProcess) {
  prof::Trace a, b;
  a.events.push_back({prof::Phase::load, "x", 100, 10, 1, 11});
  a.pids = {11};
  a.process_names = {"python3"};
  a.counters[0] = 2;
  b.events.push_back({prof::Phase::load, "y", 50, 10, 1, 22});
  b.pids = {22};
  b.process_names = {"epload"};
  b.counters[0] = 3;
  prof::merge(a, b);
  ASSERT_EQ(a.events.size(), 2u);
  EXPECT_EQ(a.events[0].subject, "y");  // by start time
  EXPECT_EQ(a.pids, (std::vector<std::int32_t>{11, 22}));
  EXPECT_EQ(a.counters[0], 5u);
  const std::string file = temp_file("merged.json");
  std::string error;
  ASSERT_TRUE(prof::write_trace(a, file, &error)) << error;
  auto back = prof::read_trace(file);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->pids, (std::vector<std::int32_t>{11, 22}));
  EXPECT_EQ(back->process_names, (std::vector<std::string>{"python3", "epload"}));
  EXPECT_EQ(back->counters[0], 5u);
}

TEST_F(Profile, BadTraceFilesAreClearErrors) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\"", "not valid JSON"},
      {"{\"other\":1}", "no \"traceEvents\" array"},
      {"{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"cat\":\"load\",\"pid\":1,\"tid\":1,\"dur\":3}]}",
       "lacks one of name, ts, dur, pid, tid"},
      {"{\"traceEvents\":[3]}", "event 1 is not an object"},
      {"{\"traceEvents\":[]} trailing", "unexpected text after"},
      // Each defect of the JSON itself, named with its byte offset.
      {"{\"traceEvents\":[1", "unterminated array at byte 17"},
      {"{\"traceEvents\":[1 2]}", "expected ',' or ']' at byte 18"},
      {"{\"traceEvents\":[1,", "unexpected end of file at byte 18"},
      {"{\"a\":1", "unterminated object at byte 6"},
      {"{\"a\":1 \"b\":2}", "expected ',' or '}' at byte 7"},
      {"{1:2}", "expected a member name at byte 1"},
      {"{\"a\" 1}", "expected ':' at byte 5"},
  };
  int k = 0;
  for (const Case& c : cases) {
    const std::string file = temp_file("bad" + std::to_string(k++) + ".json");
    write_text(file, c.text);
    auto r = prof::read_trace(file);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(file), std::string::npos) << r.error().message;
  }
  auto missing = prof::read_trace(temp_file("nosuch.json"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("cannot open trace"), std::string::npos);
  // A FIFO in a trace's place is refused at once (opening it for reading
  // would otherwise wait for a writer forever).
  const std::string fifo = temp_file("fifo.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto not_file = prof::read_trace(fifo);
  ASSERT_FALSE(not_file.ok());
  EXPECT_NE(not_file.error().message.find("not a regular file"), std::string::npos) << not_file.error().message;
  // Events of other tools (unknown categories, other phases) are skipped.
  const std::string foreign = temp_file("foreign.json");
  write_text(foreign,
             "[{\"ph\":\"X\",\"name\":\"v8\",\"cat\":\"v8.gc\",\"ts\":1,\"dur\":2,\"pid\":1,\"tid\":1},"
             "{\"ph\":\"B\",\"name\":\"b\",\"ts\":1,\"pid\":1,\"tid\":1},"
             "{\"ph\":\"X\",\"name\":\"\\u00e9\\ud83d\\ude00\",\"cat\":\"load\",\"ts\":1.5,\"dur\":2,\"pid\":1,\"tid\":1}]");
  auto f = prof::read_trace(foreign);
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_EQ(f->events.size(), 1u);
  EXPECT_EQ(f->events[0].subject, "\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(f->events[0].start_ns, 1500);
}

TEST_F(Profile, WriteTraceToAMissingDirectoryFailsClearly) {
  prof::enable();
  { prof::Span s(prof::Phase::scan); }
  std::string error;
  EXPECT_FALSE(prof::write_trace("/nonexistent-dir-epload/trace.json", &error));
  EXPECT_NE(error.find("cannot write trace /nonexistent-dir-epload/trace.json"), std::string::npos) << error;
}

TEST_F(Profile, TracePathExpandsProcessId) {
  EXPECT_EQ(prof::detail::expand_trace_path("/tmp/t-%p.json", 42), "/tmp/t-42.json");
  EXPECT_EQ(prof::detail::expand_trace_path("/tmp/%p/%p", 7), "/tmp/7/7");
  EXPECT_EQ(prof::detail::expand_trace_path("/tmp/100%", 7), "/tmp/100%");
}

}  // namespace
}  // namespace epload
