// elf.hpp — read a backend's declared devices from its ELF file, without
// loading it.
#pragma once

#include <cstdint>      // abi version
#include <string>       // device names, paths
#include <string_view>  // section text
#include <vector>       // device list

#include "epload/index.hpp"   // FileStamp
#include "epload/result.hpp"  // Result
#include "file_stamp.hpp"

namespace epload::detail {

/// What the "epload_devices" section of a library says.
struct DeclaredDevices {
  bool has_section = false;   ///< false: the library declares nothing (devices are learned)
  std::uint32_t abi = 0;      ///< the ABI version in the tag; 0 when there is no section
  std::vector<std::string> devices;  ///< in section order, de-duplicated; empty + has_section: a hook
  /// No section, and the dynamic string table names the Python module init
  /// asked for (read_declared_devices_fd's `python_init`): a CPython
  /// extension module, imported by Python, not a backend.h library.
  bool python_module = false;
};

/// Parses the bytes of an "epload_devices" section (NUL-separated strings:
/// the tag "epload-abi=N" first, then device names; empty strings are
/// padding).  `file` names the library in messages.
Result<DeclaredDevices> parse_declared_section(std::string_view bytes, std::string_view file);

/// Reads the section from the open file `fd` with pread only (the ELF
/// header, the section header table, the section-name table and the one
/// section; a few KiB at most).  A truncated, corrupt or non-ELF file is an
/// Errc::backend error naming `file` and what is wrong; this never crashes
/// and never reads out of the file's bounds.  `file_size` is the size fstat
/// reported.  With `python_init` ("PyInit_<module>") and no section, the
/// dynamic string table (.dynstr) is read too, to tell a CPython extension
/// module (python_module) from a backend.h library.
Result<DeclaredDevices> read_declared_devices_fd(int fd, std::uint64_t file_size, std::string_view file,
                                                 std::string_view python_init = {});

/// Opens `path`, stamps it (fstat) into `*stamp` when given, and reads its
/// declared devices.  A missing file is Errc::not_found.
Result<DeclaredDevices> read_declared_devices(const std::string& path, FileStamp* stamp = nullptr);

/// True when `name` is a valid device name: 1..63 bytes of [A-Za-z0-9_.:-].
bool valid_device_name(std::string_view name);

/// "" for a valid device name, else the message that says why not (the
/// name shown printable, cut at 80 bytes).
std::string device_name_problem(std::string_view name);

}  // namespace epload::detail
