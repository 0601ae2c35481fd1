// elf.cpp — the declared devices of a backend, read from its ELF file.
//
// A backend declares its devices with EPLOAD_DECLARE_DEVICES (backend.h),
// which puts NUL-separated strings in the section "epload_devices".  Reading
// them must not load or run the library, and must cost little enough to do
// for every native backend when the loader first meets it, so this reads the
// file with pread only, touching four small regions: the first 4 KiB (ELF
// and program headers), the section header table (~2 KiB), the section-name
// string table (a few hundred bytes) and the section itself (tens of bytes).
// No mmap, no libelf, no dlopen.  On the way it checks that every loadable
// segment lies within the file, because dlopen of a truncated library does
// not fail: it crashes the process (SIGBUS) when it touches the missing
// pages.  A library that passes here is safe to hand to dlopen.
//
// Every offset and size in the file is untrusted: each region is checked to
// lie within the file (with overflow-safe arithmetic) and to have a plausible
// size before it is read, so a truncated, corrupt or hostile file yields a
// clear error, never a crash or a huge allocation.  Both ELF classes and byte
// orders are parsed; a class or machine other than the host's is reported up
// front, since dlopen would refuse it anyway with a vaguer message.
#include "elf.hpp"

#include <fcntl.h>     // open
#include <sys/stat.h>  // fstat
#include <unistd.h>    // close

#include <cerrno>   // errno
#include <cstring>  // strerror, memcmp

#include "pread_full.hpp"
#include "stamp.hpp"

namespace epload::detail {

namespace {

// Limits far above anything a real library has; they only bound the memory a
// corrupt header can make us allocate.
constexpr std::uint64_t k_max_section_headers = 1u << 16;
constexpr std::uint64_t k_max_strtab = 1u << 20;
constexpr std::uint64_t k_max_devices_section = 1u << 16;
// The dynamic string table of a big extension module is a few MiB.
constexpr std::uint64_t k_max_dynstr = 64u << 20;

constexpr std::string_view k_section_name = "epload_devices";
constexpr std::string_view k_abi_prefix = "epload-abi=";

#if defined(__x86_64__)
constexpr unsigned k_host_machine = 62;  // EM_X86_64
#elif defined(__aarch64__)
constexpr unsigned k_host_machine = 183;  // EM_AARCH64
#else
constexpr unsigned k_host_machine = 0;  // unknown: not checked
#endif
constexpr unsigned k_host_class = sizeof(void*) == 8 ? 2 : 1;

Error corrupt(std::string_view file, const std::string& why) {
  return Error{Errc::backend, std::string(file) + ": not a usable shared library: " + why +
                                  " (reinstall the distribution that owns it)"};
}

// Field reader honouring the file's byte order.
struct Fields {
  bool big_endian = false;
  std::uint64_t get(const unsigned char* p, unsigned size) const {
    std::uint64_t v = 0;
    for (unsigned i = 0; i < size; ++i) {
      const unsigned shift = big_endian ? 8 * (size - 1 - i) : 8 * i;
      v |= static_cast<std::uint64_t>(p[i]) << shift;
    }
    return v;
  }
};

// Reads exactly `size` bytes at `offset`; the caller checked the bounds, so
// a short read means the file changed under us.
bool read_exact(int fd, std::uint64_t offset, void* buf, std::size_t size) {
  return detail::pread_full(fd, buf, size, offset) == static_cast<ssize_t>(size);
}

// True when [offset, offset+size) lies within a file of `file_size` bytes.
bool within(std::uint64_t offset, std::uint64_t size, std::uint64_t file_size) {
  return offset <= file_size && size <= file_size - offset;
}

// At most 80 characters of `name`, control and non-ASCII bytes shown as '?':
// safe to put in a message.
std::string printable(std::string_view name) {
  std::string shown(name.substr(0, 80));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return shown;
}

}  // namespace

bool valid_device_name(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (unsigned char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string device_name_problem(std::string_view name) {
  if (valid_device_name(name)) return {};
  return "'" + printable(name) + "' is not a device name (1-63 characters of A-Z a-z 0-9 _ . : -)";
}

Result<DeclaredDevices> parse_declared_section(std::string_view bytes, std::string_view file) {
  DeclaredDevices out;
  out.has_section = true;
  std::size_t i = 0;
  while (i < bytes.size()) {
    std::size_t end = bytes.find('\0', i);
    if (end == std::string_view::npos) end = bytes.size();  // unterminated last string
    std::string_view s = bytes.substr(i, end - i);
    i = end + 1;
    if (s.empty()) continue;  // padding (e.g. a patched, NUL-filled placeholder)
    if (s.starts_with(k_abi_prefix)) {
      std::string_view digits = s.substr(k_abi_prefix.size());
      std::uint32_t v = 0;
      bool ok = !digits.empty() && digits.size() <= 9;
      for (char c : digits) {
        if (c < '0' || c > '9') ok = false;
        v = v * 10 + static_cast<std::uint32_t>(c - '0');
      }
      if (!ok || v == 0) {
        return corrupt(file, "section epload_devices has a malformed ABI tag '" + std::string(s) + "'");
      }
      if (out.abi != 0 && out.abi != v) {
        return corrupt(file, "section epload_devices carries two ABI versions (" +
                                 std::to_string(out.abi) + " and " + std::to_string(v) +
                                 "): its objects were built against different epload headers");
      }
      out.abi = v;
      continue;
    }
    if (out.abi == 0) {
      return corrupt(file, "section epload_devices does not start with an ABI tag "
                           "(declare devices with EPLOAD_DECLARE_DEVICES from epload/backend.h)");
    }
    if (!valid_device_name(s)) {
      return corrupt(file, "section epload_devices declares an invalid device name '" + printable(s) +
                               "' (1-63 characters of A-Z a-z 0-9 _ . : -)");
    }
    bool seen = false;
    for (const std::string& d : out.devices) seen = seen || d == s;
    if (!seen) out.devices.emplace_back(s);
  }
  if (out.abi == 0) return corrupt(file, "section epload_devices is empty (no ABI tag)");
  return out;
}

namespace {

// An open ELF file under check: its size and name, its first bytes (the ELF
// header and, in any ordinary library, the program headers right behind
// it), and once check_header() passed, its class and byte order.
struct ElfFile {
  int fd;
  std::uint64_t size;
  std::string_view name;
  const unsigned char* head;
  std::size_t head_size;
  bool is64 = false;
  Fields f;
};

// The identity bytes and the ELF header: a shared object of this machine.
Result<void> check_header(ElfFile& e) {
  const unsigned char* eh = e.head;
  if (std::memcmp(eh, "\x7f" "ELF", 4) != 0) return corrupt(e.name, "not an ELF file (bad magic)");
  const unsigned cls = eh[4], data = eh[5];
  if (cls != 1 && cls != 2) return corrupt(e.name, "unknown ELF class " + std::to_string(cls));
  if (data != 1 && data != 2) return corrupt(e.name, "unknown ELF byte order " + std::to_string(data));
  e.is64 = cls == 2;
  const std::uint64_t header_size = e.is64 ? 64 : 52;
  if (e.size < header_size) return corrupt(e.name, "truncated ELF header");
  e.f = Fields{data == 2};

  const unsigned type = static_cast<unsigned>(e.f.get(eh + 16, 2));
  const unsigned machine = static_cast<unsigned>(e.f.get(eh + 18, 2));
  if (cls != k_host_class || (k_host_machine != 0 && machine != k_host_machine)) {
    return corrupt(e.name, "built for another machine (ELF class " + std::to_string(cls) +
                               ", machine " + std::to_string(machine) + ")");
  }
  if (type != 3) {  // ET_DYN
    return corrupt(e.name, "ELF type " + std::to_string(type) + " is not a shared object");
  }
  return {};
}

// Every loadable segment must lie within the file: dlopen maps them, and
// touching a page past the end of a truncated file kills the process
// with SIGBUS instead of failing.
Result<void> check_segments(const ElfFile& e) {
  const unsigned char* eh = e.head;
  const bool is64 = e.is64;
  const std::uint64_t phoff = is64 ? e.f.get(eh + 0x20, 8) : e.f.get(eh + 0x1C, 4);
  const unsigned phentsize = static_cast<unsigned>(e.f.get(eh + (is64 ? 0x36 : 0x2A), 2));
  const std::uint64_t phnum = e.f.get(eh + (is64 ? 0x38 : 0x2C), 2);
  const unsigned min_phentsize = is64 ? 56 : 32;
  if (phnum == 0 || phentsize < min_phentsize) return corrupt(e.name, "no program headers");
  if (phnum > 4096 || !within(phoff, phnum * phentsize, e.size)) {
    return corrupt(e.name, "program headers lie outside the file (truncated?)");
  }
  std::string phdrs;
  const unsigned char* ph;
  if (phoff + phnum * phentsize <= e.head_size) {
    ph = e.head + phoff;
  } else {
    phdrs.resize(static_cast<std::size_t>(phnum * phentsize));
    if (!read_exact(e.fd, phoff, phdrs.data(), phdrs.size())) {
      return corrupt(e.name, "cannot read program headers");
    }
    ph = reinterpret_cast<const unsigned char*>(phdrs.data());
  }
  for (std::uint64_t i = 0; i < phnum; ++i) {
    const unsigned char* p = ph + i * phentsize;
    if (e.f.get(p, 4) != 1) continue;  // PT_LOAD
    const std::uint64_t off = is64 ? e.f.get(p + 8, 8) : e.f.get(p + 4, 4);
    const std::uint64_t filesz = is64 ? e.f.get(p + 32, 8) : e.f.get(p + 16, 4);
    if (!within(off, filesz, e.size)) {
      return corrupt(e.name, "a loadable segment lies outside the file (truncated?)");
    }
  }
  return {};
}

// The section epload_devices, found by name through the section headers
// and the section-name string table; none (stripped, or not declared) is
// an empty DeclaredDevices.
Result<DeclaredDevices> read_devices_section(const ElfFile& e, std::string_view python_init) {
  const unsigned char* eh = e.head;
  const bool is64 = e.is64;
  const Fields& f = e.f;
  const std::string_view file = e.name;
  const std::uint64_t shoff = is64 ? f.get(eh + 0x28, 8) : f.get(eh + 0x20, 4);
  const unsigned shentsize = static_cast<unsigned>(f.get(eh + (is64 ? 0x3A : 0x2E), 2));
  std::uint64_t shnum = f.get(eh + (is64 ? 0x3C : 0x30), 2);
  std::uint64_t shstrndx = f.get(eh + (is64 ? 0x3E : 0x32), 2);
  const unsigned min_entsize = is64 ? 64 : 40;

  if (shoff == 0) return DeclaredDevices{};  // no section headers (stripped): nothing declared
  if (shentsize < min_entsize) return corrupt(file, "section header entries are too small");
  // Offsets of the fields we need within one section header.
  const unsigned o_name = 0, o_type = 4;
  const unsigned o_offset = is64 ? 24 : 16, o_size = is64 ? 32 : 20, o_link = is64 ? 40 : 24;
  const unsigned w = is64 ? 8 : 4;

  if (shnum == 0 || shstrndx == 0xffff) {
    // Extended numbering: the real values live in section header 0.
    unsigned char sh0[64];
    if (!within(shoff, min_entsize, e.size)) return corrupt(file, "section headers lie outside the file (truncated?)");
    if (!read_exact(e.fd, shoff, sh0, min_entsize)) return corrupt(file, "cannot read section header 0");
    if (shnum == 0) shnum = f.get(sh0 + o_size, w);
    if (shstrndx == 0xffff) shstrndx = f.get(sh0 + o_link, 4);
  }
  if (shnum == 0) return DeclaredDevices{};
  if (shnum > k_max_section_headers) return corrupt(file, "implausible section count " + std::to_string(shnum));
  const std::uint64_t table_size = shnum * shentsize;
  if (!within(shoff, table_size, e.size)) {
    return corrupt(file, "section headers lie outside the file (truncated?)");
  }
  if (shstrndx >= shnum) return corrupt(file, "section-name table index out of range");
  std::string table(static_cast<std::size_t>(table_size), '\0');
  if (!read_exact(e.fd, shoff, table.data(), table.size())) return corrupt(file, "cannot read section headers");
  auto header = [&](std::uint64_t i) {
    return reinterpret_cast<const unsigned char*>(table.data()) + i * shentsize;
  };

  const unsigned char* strh = header(shstrndx);
  const std::uint64_t str_off = f.get(strh + o_offset, w), str_size = f.get(strh + o_size, w);
  if (f.get(strh + o_type, 4) == 8 /* SHT_NOBITS */ || str_size > k_max_strtab ||
      !within(str_off, str_size, e.size)) {
    return corrupt(file, "section-name table lies outside the file (truncated?)");
  }
  std::string names(static_cast<std::size_t>(str_size), '\0');
  if (!read_exact(e.fd, str_off, names.data(), names.size())) return corrupt(file, "cannot read section names");

  std::uint64_t dynstr = 0;  // its header's number; 0: none
  for (std::uint64_t i = 1; i < shnum; ++i) {
    const unsigned char* h = header(i);
    const std::uint64_t name = f.get(h + o_name, 4);
    if (name >= names.size()) continue;  // a bad name cannot be ours
    const std::size_t end = names.find('\0', static_cast<std::size_t>(name));
    if (end == std::string::npos) continue;
    const std::string_view section = std::string_view(names).substr(name, end - name);
    if (section == ".dynstr") dynstr = i;
    if (section != k_section_name) continue;
    const std::uint64_t off = f.get(h + o_offset, w), size = f.get(h + o_size, w);
    if (f.get(h + o_type, 4) == 8 || size > k_max_devices_section || !within(off, size, e.size)) {
      return corrupt(file, "section epload_devices lies outside the file (truncated?)");
    }
    std::string bytes(static_cast<std::size_t>(size), '\0');
    if (!read_exact(e.fd, off, bytes.data(), bytes.size())) return corrupt(file, "cannot read section epload_devices");
    return parse_declared_section(bytes, file);
  }
  DeclaredDevices none;
  if (python_init.empty() || dynstr == 0) return none;
  // A CPython extension module exports PyInit_<module>: the string is in the
  // dynamic string table, NUL-delimited on both sides.
  const unsigned char* h = header(dynstr);
  const std::uint64_t off = f.get(h + o_offset, w), size = f.get(h + o_size, w);
  if (f.get(h + o_type, 4) == 8 || size > k_max_dynstr || !within(off, size, e.size)) return none;
  std::string bytes(static_cast<std::size_t>(size), '\0');
  if (!read_exact(e.fd, off, bytes.data(), bytes.size())) return corrupt(file, "cannot read section .dynstr");
  std::string needle(1, '\0');
  needle.append(python_init).push_back('\0');
  none.python_module = bytes.find(needle) != std::string::npos;
  return none;
}

}  // namespace

Result<DeclaredDevices> read_declared_devices_fd(int fd, std::uint64_t file_size, std::string_view file,
                                                 std::string_view python_init) {
  // One read for the ELF header and, in any ordinary library, the program
  // headers right behind it.
  unsigned char head[4096];
  if (file_size < 16) {
    return corrupt(file, file_size == 0 ? "the file is empty" : "the file is too short for ELF");
  }
  const std::size_t head_size = file_size < sizeof head ? static_cast<std::size_t>(file_size) : sizeof head;
  if (!read_exact(fd, 0, head, head_size)) return corrupt(file, "cannot read the ELF header");
  ElfFile e{fd, file_size, file, head, head_size, false, Fields{}};
  if (auto r = check_header(e); !r) return r.error();
  if (auto r = check_segments(e); !r) return r.error();
  return read_devices_section(e, python_init);
}

Result<DeclaredDevices> read_declared_devices(const std::string& path, FileStamp* stamp) {
  // O_NONBLOCK: a FIFO in the library's place must not hang the open.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    return Error{e == ENOENT || e == ENOTDIR ? Errc::not_found : Errc::io,
                 path + ": " + std::strerror(e)};
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Error{Errc::io, path + ": " + std::strerror(e)};
  }
  if (stamp != nullptr) *stamp = stamp_of(st);
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return corrupt(path, "not a regular file");
  }
  auto result = read_declared_devices_fd(fd, static_cast<std::uint64_t>(st.st_size), path);
  ::close(fd);
  return result;
}

}  // namespace epload::detail
