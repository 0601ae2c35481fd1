// python_memo.cpp — an interpreter's sys.path, remembered (python_memo.hpp).
//
// Starting an interpreter to ask for its sys.path costs 40 ms for
// /usr/bin/python3 and 320 ms through pyenv's shim (a bash script that runs
// pyenv, which runs the interpreter), far more than the cached query it
// precedes.  So the answer is kept in the cache directory with the inputs
// it was derived from, and reused while every input is as it was.  The
// inputs are those of CPython's getpath and site.py (3.10-3.13):
//
//   - which file `python3` is: the PATH lookup execvp would do (re-done
//     every run: a stat per PATH entry up to the hit), and that file's
//     stamp (a symlink retargeted or an interpreter upgraded changes it);
//   - a pyenv shim (a script that execs `$PYENV_ROOT/libexec/pyenv exec`)
//     chooses the interpreter itself: from PYENV_VERSION, else the first
//     `.python-version` in $PYENV_DIR or the current directory and their
//     parents, else `$PYENV_ROOT/version`, among the installed versions
//     (`system`: the next one on PATH).  All of these are recorded: the
//     variables (PATH included), the local version file's path (searched
//     again every run, as pyenv searches) and the stamps of it, of the
//     global version file, the versions directory and pyenv itself.  Any
//     other script may choose by rules we cannot know: it is asked every run;
//   - the variables that shape sys.path: PYTHONPATH, PYTHONHOME,
//     PYTHONNOUSERSITE, PYTHONSAFEPATH, PYTHONPLATLIBDIR, PYTHONUSERBASE,
//     PYTHONEXECUTABLE, and HOME (the user site directory).  VIRTUAL_ENV is
//     not read by CPython: a venv is found through the executable's path and
//     its pyvenv.cfg;
//   - reported by the interpreter: the real executable, both pyvenv.cfg
//     places, every site directory (the user's too, even when absent), every
//     absolute sys.path directory, every .pth file in the site directories,
//     whether each directory a .pth line names exists (site.py adds it only
//     if it does), sitecustomize/usercustomize; and whether a relative
//     PYTHONPATH entry made the answer depend on the current directory.
//
// What is not seen: an `import` line of a .pth file, or a sitecustomize,
// that computes sys.path from inputs of its own.
//
// The answer is taken after the stamps' clock instant (git's racy rule): a
// stamp not older than the moment the interpreter was started may hide a
// change made while it ran, and then nothing is remembered.  The file is
// written like every cache file (write_atomic, 0600, in a directory
// make_safe_dir accepts) and read only when it is ours, not writable by
// others, whole (its body hash) and for the same interpreter name and path.
#include "cli/python_memo.hpp"

#include <fcntl.h>     // open
#include <spawn.h>     // posix_spawn
#include <sys/stat.h>  // fstat
#include <sys/wait.h>  // waitpid
#include <unistd.h>    // pipe, read, close, access, getcwd

#include <cerrno>   // errno
#include <cstdlib>  // getenv, strtoull
#include <cstring>  // strerror
#include <unordered_set>  // paths stamped once

#include "atomic_file.hpp"     // make_safe_dir, write_atomic, unsafe_reason
#include "cache_internal.hpp"  // body_hash, put_hex16, parse_hex16
#include "kept_files.hpp"      // keep_files
#include "pread_full.hpp"      // pread_full
#include "stamp.hpp"           // stamp_at, coarse_now_ns, is_racy

extern char** environ;

namespace epload::cli {
namespace {

using epload::FileStamp;
using detail::pread_full;

constexpr std::string_view k_magic = "epload-python 1\n";

/// The memo files (memo_path()), pruned and cleared with the cache's.
constexpr detail::KeptFiles k_memo_files{"python-", ".txt", "epload-python "};
[[maybe_unused]] const bool k_memo_files_kept = detail::keep_files(k_memo_files);
constexpr std::size_t k_max_memo = 1 << 20;

/// The variables CPython reads to build sys.path (see the top comment).
constexpr const char* k_python_env[] = {"PYTHONPATH",       "PYTHONHOME",     "PYTHONNOUSERSITE",
                                        "PYTHONSAFEPATH",   "PYTHONPLATLIBDIR", "PYTHONUSERBASE",
                                        "PYTHONEXECUTABLE", "HOME"};
/// And those pyenv's choice of interpreter reads.
constexpr const char* k_pyenv_env[] = {"PYENV_VERSION", "PYENV_DIR", "PYENV_HOOK_PATH", "PATH"};

// The asking program: tagged fields, NUL-separated (paths are bytes).
//   x r v: sys.executable, sys.prefix, sys.version;  p: a sys.path entry;
//   e: an extension suffix;  s: a path to stamp;  d: a path whose existence
//   counts;  c: the answer depends on the current directory.
constexpr const char* k_program = R"PY(import os, sys
F = []
def a(t, s): F.append(t + (s if type(s) is bytes else os.fsencode(s)))
a(b'x', sys.executable); a(b'r', sys.prefix); a(b'v', sys.version)
for p in sys.path: a(b'p', p)
try:
    from importlib.machinery import EXTENSION_SUFFIXES
    for s in EXTENSION_SUFFIXES: a(b'e', s)
except Exception: pass
j, d, x = os.path.join, os.path.dirname, sys.executable
if x:
    a(b's', os.path.realpath(x))
    for v in (j(d(x), 'pyvenv.cfg'), j(d(d(x)), 'pyvenv.cfg')): a(b's', v)
S, m = [], sys.modules.get('site')
if m is not None:
    try: S += m.getsitepackages()
    except Exception: pass
    try: S.append(m.getusersitepackages())
    except Exception: pass
for p in S + [p for p in sys.path if type(p) is str and p.startswith('/')]: a(b's', p)
for sd in S:
    try: names = sorted(os.listdir(sd))
    except OSError: continue
    for n in names:
        if not n.endswith('.pth'): continue
        f = j(sd, n); a(b's', f)
        try:
            with open(f, 'rb') as h: lines = h.read().decode('utf-8', 'surrogateescape').splitlines()
        except OSError: continue
        for l in lines:
            if l.startswith(('#', 'import ', 'import\t')) or not l.strip(): continue
            a(b'd', j(sd, l.rstrip()))
for n in ('sitecustomize', 'usercustomize'):
    f = getattr(sys.modules.get(n), '__file__', None)
    if f: a(b's', f)
e = os.environ
pp = e.get('PYTHONPATH')
if (pp and any(not q.startswith('/') for q in pp.split(os.pathsep))) or any(
        e.get(k) and not e[k].startswith('/') for k in ('PYTHONHOME', 'PYTHONUSERBASE')):
    a(b'c', b'')
sys.stdout.buffer.write(b'\0'.join(F))
)PY";

std::string cwd_text() {
  std::string buf(4096, '\0');
  while (::getcwd(buf.data(), buf.size()) == nullptr) {
    if (errno != ERANGE) return {};
    buf.resize(buf.size() * 2);
  }
  buf.resize(std::strlen(buf.c_str()));
  return buf;
}

/// The file execvp would run for `name`: `name` itself when it holds a '/',
/// else the first executable regular file `dir/name` along PATH (an empty
/// entry is the current directory).  Absolute (made so against the current
/// directory).  "" when there is none.
std::string find_program(const std::string& name) {
  auto absolute = [](std::string p) { return p.starts_with('/') ? p : cwd_text() + '/' + p; };
  if (name.find('/') != std::string::npos) return absolute(name);
  const char* path = std::getenv("PATH");
  std::string_view rest = path != nullptr ? path : "/bin:/usr/bin";
  for (;;) {
    const std::size_t colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    std::string candidate = dir.empty() ? name : std::string(dir) + '/' + name;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return absolute(std::move(candidate));
    }
    if (colon == std::string_view::npos) return {};
    rest.remove_prefix(colon + 1);
  }
}

/// PYENV_ROOT when `file` is a pyenv shim (a script exporting PYENV_ROOT
/// and exec'ing pyenv), "" when it is another script, "-" when it is not a
/// script at all.
std::string pyenv_root_of_shim(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return "-";
  char buf[1024];
  const ssize_t n = pread_full(fd, buf, sizeof buf, 0);
  ::close(fd);
  const std::string_view text(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  if (!text.starts_with("#!")) return "-";
  constexpr std::string_view k_export = "\nexport PYENV_ROOT=\"";
  const std::size_t at = text.find(k_export);
  if (at == std::string_view::npos || text.find("/libexec/pyenv\" exec ") == std::string_view::npos) return "";
  const std::size_t begin = at + k_export.size(), end = text.find('"', begin);
  return end == std::string_view::npos ? "" : std::string(text.substr(begin, end - begin));
}

/// The directory pyenv's bash starts in: $PWD when it names the current
/// directory (bash keeps it, symlinks and all), else getcwd().
std::string shell_pwd() {
  const char* pwd = std::getenv("PWD");
  struct stat a, b;
  if (pwd != nullptr && pwd[0] == '/' && ::stat(pwd, &a) == 0 && ::stat(".", &b) == 0 && a.st_dev == b.st_dev &&
      a.st_ino == b.st_ino) {
    return pwd;
  }
  return cwd_text();
}

/// pyenv-version-file's local search: the first regular `.python-version`
/// in $PYENV_DIR (default $PWD) or its parents, else in $PWD or its
/// parents; "" when none (pyenv then reads $PYENV_ROOT/version).
std::string pyenv_local_version_file() {
  auto search = [](std::string root) -> std::string {
    for (;;) {
      const std::string file = root + "/.python-version";
      struct stat st;
      if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return file;
      if (root.empty()) return {};
      root.resize(root.rfind('/') == std::string::npos ? 0 : root.rfind('/'));
    }
  };
  const std::string pwd = shell_pwd();
  const char* env_dir = std::getenv("PYENV_DIR");
  const std::string dir = env_dir != nullptr && env_dir[0] != '\0' ? env_dir : pwd;
  std::string found = search(dir);
  if (found.empty() && dir != pwd) found = search(pwd);
  return found;
}

std::string stamp_text(const FileStamp& s) {
  return std::to_string(s.dev) + ':' + std::to_string(s.ino) + ':' + std::to_string(s.size) + ':' +
         std::to_string(s.mtime_ns) + ':' + std::to_string(s.ctime_ns) + ':' + std::to_string(s.mode) + ':';
}

/// The memo's checks and answer as tagged fields (see parse and check).
struct Memo {
  std::vector<std::string> fields;
  bool racy = false;  ///< a stamp may hide a change made while asking
  std::int64_t asked_at = 0;
  std::unordered_set<std::string> stamped;
  void add(char tag, std::string_view value) { fields.emplace_back(1, tag).append(value); }
  void env(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr) return add('U', name);
    add('E', std::string(name) + '=' + v);
  }
  void stamp(const std::string& path) {
    if (!stamped.insert(path).second) return;  // a site directory is on sys.path too
    const FileStamp s = detail::stamp_at(AT_FDCWD, path.c_str());
    racy = racy || detail::is_racy(s, asked_at);
    add('F', stamp_text(s) + path);
  }
};

/// True when the check field `f` (tag and value) holds now.  `cwd` is
/// filled on first need.
bool check_holds(std::string_view f, std::string& cwd) {
  const char tag = f[0];
  const std::string_view v = f.substr(1);
  switch (tag) {
    case 'E': {
      const std::size_t eq = v.find('=');
      const char* now = std::getenv(std::string(v.substr(0, eq)).c_str());
      return eq != std::string_view::npos && now != nullptr && v.substr(eq + 1) == now;
    }
    case 'U': return std::getenv(std::string(v).c_str()) == nullptr;
    case 'F': {  // six numbers, each ending in ':', then the path
      std::size_t from = 0;
      for (int i = 0; i < 6; ++i) {
        const std::size_t at = v.find(':', from);
        if (at == std::string_view::npos) return false;
        from = at + 1;
      }
      const std::string path(v.substr(from));
      return stamp_text(detail::stamp_at(AT_FDCWD, path.c_str())) == v.substr(0, from);
    }
    case 'D': {
      struct stat st;
      return !v.empty() && (v[0] == '1') == (::stat(std::string(v.substr(1)).c_str(), &st) == 0);
    }
    case 'C':
      if (cwd.empty()) cwd = cwd_text();
      return v == cwd;
    case 'L': return v == pyenv_local_version_file();
    default: return false;
  }
}

/// Runs `python -c k_program` (the file `found`, argv[0] as given, so that
/// the interpreter finds itself as it would when run by name) and returns
/// its fields.
Result<std::vector<std::string>> ask(const std::string& python, const std::string& found) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Error{Errc::io, std::string("pipe: ") + std::strerror(errno)};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  const char* argv[] = {python.c_str(), "-c", k_program, nullptr};
  pid_t pid = 0;
  const int rc = found.empty() ? ENOENT
                               : ::posix_spawn(&pid, found.c_str(), &actions, nullptr, const_cast<char**>(argv),
                                               environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return Error{Errc::not_found, "cannot run interpreter '" + python + "': " + std::strerror(rc) +
                                      " (pass --python EXE, or give the search paths with --path)"};
  }
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Error{Errc::io, "interpreter '" + python + "' failed to report its sys.path (exit status " +
                               std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")"};
  }
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= out.size(); ++i) {
    if (i == out.size() || out[i] == '\0') {
      fields.emplace_back(out, start, i - start);
      start = i + 1;
    }
  }
  if (fields.size() < 3 || fields[0][0] != 'x') {
    return Error{Errc::io, "interpreter '" + python + "' gave no sys.path"};
  }
  return fields;
}

/// The answer fields (x r v p e) of `fields` as facts.
PythonFacts facts_of(const std::vector<std::string>& fields) {
  PythonFacts f;
  for (const std::string& field : fields) {
    if (field.empty()) continue;
    const std::string_view v = std::string_view(field).substr(1);
    switch (field[0]) {
      case 'x': f.executable = v; break;
      case 'r': f.prefix = v; break;
      case 'v': f.version = v; break;
      case 'p': f.sys_path.emplace_back(v); break;
      case 'e': f.ext_suffixes.emplace_back(v); break;
      default: break;
    }
  }
  return f;
}

/// The memo for an answer: its checks first (cheapest first), then the
/// answer.  Nothing (racy) when a pyenv-less script chose the interpreter.
Memo memo_of(const std::string& python, const std::string& found, const std::string& pyenv_root,
             const std::vector<std::string>& answer, std::int64_t asked_at) {
  Memo m;
  m.asked_at = asked_at;
  m.add('A', python);  // the name asked for and the file it found: the
  m.add('I', found);   // memo's own identity, checked first
  for (const char* name : k_python_env) m.env(name);
  if (!pyenv_root.empty()) {
    for (const char* name : k_pyenv_env) m.env(name);
    const std::string local = pyenv_local_version_file();
    m.add('L', local);
    if (!local.empty()) m.stamp(local);
    for (const char* rel : {"/version", "/versions", "/libexec/pyenv"}) m.stamp(pyenv_root + rel);
  }
  m.stamp(found);
  for (const std::string& field : answer) {
    if (field.empty()) continue;
    const std::string path = field.substr(1);
    if (field[0] == 's') {
      m.stamp(path);
    } else if (field[0] == 'd') {
      struct stat st;
      m.add('D', (::stat(path.c_str(), &st) == 0 ? "1" : "0") + path);
    } else if (field[0] == 'c') {
      m.add('C', cwd_text());
    }
  }
  for (const std::string& field : answer) {
    if (!field.empty() && std::string_view("xrvpe").find(field[0]) != std::string_view::npos) {
      m.fields.push_back(field);
    }
  }
  return m;
}

std::string memo_path(const std::string& cache_dir, const std::string& python, const std::string& found) {
  // Named by the interpreter and the variables that shape sys.path, so that
  // switching between two settings does not overwrite one memo with another.
  std::string name = python + '\0' + found + '\0';
  for (const char* v : k_python_env) {
    const char* value = std::getenv(v);
    name.append(value != nullptr ? value : "\1").push_back('\0');
  }
  const char* version = std::getenv("PYENV_VERSION");  // pyenv's own switch
  name.append(version != nullptr ? version : "\1");
  char hex[16];
  detail::put_hex16(hex, detail::body_hash(name));
  return detail::join_path(cache_dir, "python-" + std::string(hex, 16) + ".txt");
}

/// The memo file's fields, or why it cannot be trusted ("" when absent).
Result<std::vector<std::string>> read_memo(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) {
    // No memo yet, or no cache directory to hold one (make_safe_dir says why
    // when it is written): nothing to warn about.
    const bool none = errno == ENOENT || errno == ENOTDIR;
    return Error{Errc::not_found, none ? "" : path + ": " + std::strerror(errno)};
  }
  struct stat st;
  std::string text;
  std::string why;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else if (why = detail::unsafe_reason(st, "the file"); !why.empty()) {
  } else if (static_cast<std::size_t>(st.st_size) > k_max_memo) {
    why = "too large";
  } else {
    text.resize(static_cast<std::size_t>(st.st_size));
    if (pread_full(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) why = "unreadable";
  }
  ::close(fd);
  std::uint64_t hash = 0;
  if (why.empty() && (!text.starts_with(k_magic) || text.size() < k_magic.size() + 17 ||
                      text[k_magic.size() + 16] != '\n' ||
                      !detail::parse_hex16(std::string_view(text).substr(k_magic.size(), 16), hash))) {
    why = "not a memo of this version";
  }
  const std::string_view body = why.empty() ? std::string_view(text).substr(k_magic.size() + 17) : "";
  if (why.empty() && detail::body_hash(body) != hash) why = "corrupt (its checksum does not match)";
  if (!why.empty()) return Error{Errc::cache, path + ": " + why};
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\0') continue;
    if (i == start) return Error{Errc::cache, path + ": corrupt (an empty field)"};
    fields.emplace_back(body.substr(start, i - start));
    start = i + 1;
  }
  if (start != body.size()) return Error{Errc::cache, path + ": corrupt (truncated)"};
  return fields;
}

/// Null when every check of `fields` (a memo of the right interpreter)
/// holds, else the first that does not, for --verbose.
const std::string* failed_check(const std::vector<std::string>& fields) {
  std::string cwd;
  for (std::size_t i = 2; i < fields.size(); ++i) {
    if (std::string_view("EUFDCL").find(fields[i][0]) == std::string_view::npos) break;  // the answer
    if (!check_holds(fields[i], cwd)) return &fields[i];
  }
  return nullptr;
}

std::string describe(const std::string& field) {
  std::string_view v = std::string_view(field).substr(1);
  if (field[0] == 'F') {
    for (int i = 0; i < 6; ++i) v.remove_prefix(v.find(':') + 1);
    return "'" + std::string(v) + "' changed";
  }
  if (field[0] == 'E' || field[0] == 'U') return "$" + std::string(v.substr(0, v.find('='))) + " changed";
  if (field[0] == 'D') return "'" + std::string(v.substr(1)) + "' appeared or went away";
  if (field[0] == 'C') return "the current directory changed";
  if (field[0] == 'L') return "the pyenv version file that applies changed";
  return std::string(v);
}

}  // namespace

Result<PythonFacts> python_facts(const FactsRequest& request, std::string& note) {
  const std::string found = find_program(request.python);
  const bool memo = request.use_memo && !request.cache_dir.empty() && !found.empty();
  const std::string path = memo ? memo_path(request.cache_dir, request.python, found) : "";
  if (memo) {
    auto fields = read_memo(path);
    if (fields) {
      const auto& f = fields.value();
      if (f.size() < 2 || f[0] != 'A' + request.python || f[1] != 'I' + found) {
        fields = Error{Errc::cache, path + ": another interpreter's (a foreign file)"};
      }
    }
    if (fields) {
      const std::string* failed = failed_check(fields.value());
      if (failed == nullptr) {
        note = "sys.path of '" + request.python + "' remembered (" + path + ")";
        return facts_of(fields.value());
      }
      note = "asked '" + request.python + "' for its sys.path: " + describe(*failed);
    } else if (!fields.error().message.empty()) {
      note = "warning: ignored the remembered sys.path: " + fields.error().message;
    } else {
      note = "asked '" + request.python + "' for its sys.path: not remembered yet";
    }
  } else {
    note = "asked '" + request.python + "' for its sys.path";
  }
  const std::int64_t asked_at = detail::coarse_now_ns();
  auto answer = ask(request.python, found);
  if (!answer) return answer.error();
  PythonFacts facts = facts_of(answer.value());
  if (!memo) return facts;
  const std::string root = pyenv_root_of_shim(found);
  if (root.empty()) {
    note += "; not remembered: '" + found + "' is a script that chooses the interpreter by rules of its own";
    return facts;
  }
  const Memo m = memo_of(request.python, found, root == "-" ? "" : root, answer.value(), asked_at);
  if (m.racy) {
    note += "; not remembered: a file it depends on changed while it was asked";
    return facts;
  }
  std::string body;
  for (const std::string& f : m.fields) body.append(f).push_back('\0');
  char hex[17];
  detail::put_hex16(hex, detail::body_hash(body));
  hex[16] = '\n';
  if (auto dir = detail::make_safe_dir(request.cache_dir); !dir) {
    note += "; not remembered: " + dir.error().message;
  } else if (auto w = detail::write_atomic(path, {k_magic, std::string_view(hex, 17), body}, 0600); !w) {
    note += "; not remembered: " + w.error().message;
  }
  return facts;
}

}  // namespace epload::cli
