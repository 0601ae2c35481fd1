// fuzz_elf.cpp — a backend's declared devices: the ELF reader
// (read_declared_devices_fd, pread only) on the input as a file, and the
// "epload_devices" section parser (parse_declared_section) on the raw bytes.
//
// Invariants: success gives an ABI tag and valid, distinct device names; an
// error has a message naming the file.
#include <cstdint>
#include <string>
#include <string_view>

#include "elf.hpp"
#include "fuzz_util.hpp"

namespace {

void check_devices(const epload::Result<epload::detail::DeclaredDevices>& r, std::string_view file) {
  using namespace epload;
  if (!r) {
    fuzz::check(r.error().message.find(file) != std::string::npos, "an ELF error that does not name the file");
    return;
  }
  const detail::DeclaredDevices& d = r.value();
  fuzz::check(d.has_section == (d.abi != 0), "a section without an ABI tag, or a tag without a section");
  fuzz::check(d.has_section || d.devices.empty(), "devices without a section");
  for (std::size_t i = 0; i < d.devices.size(); ++i) {
    fuzz::check(detail::valid_device_name(d.devices[i]), "an invalid device name was accepted");
    for (std::size_t j = 0; j < i; ++j) fuzz::check(d.devices[i] != d.devices[j], "a duplicate device name");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace epload;
  constexpr std::string_view k_file = "fuzz/_backend.so";
  {
    fuzz::MemFile file(data, size);
    check_devices(detail::read_declared_devices_fd(file.fd(), size, k_file), k_file);
  }
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (size <= 4096) check_devices(detail::parse_declared_section(bytes, k_file), k_file);
  return 0;
}
