// torch_rules.hpp — what PyTorch's own rules impose on the backends of its
// group: its entry points are Python callables only, and its own device
// types cannot be a backend's.  Used by the command's listing and the
// Python front (through the _native module), so both say the same.
#pragma once

#include <array>        // the device types
#include <string>       // messages
#include <string_view>  // names

namespace epload::detail {

/// PyTorch's autoload group.
inline constexpr std::string_view k_torch_group = "torch.backends";

/// PyTorch's own device types (c10::DeviceType's names, as `torch.device`
/// parses them): a backend that declares one of these is never consulted
/// for it under torch.
inline constexpr std::array<std::string_view, 21> k_torch_device_types = {
    "cpu", "cuda", "mkldnn", "opengl", "opencl", "ideep", "hip",  "ve",  "fpga",         "maia", "xla",
    "vulkan", "metal", "xpu", "mps", "meta", "hpu",   "lazy", "ipu", "mtia", "privateuseone"};

inline bool is_torch_device_type(std::string_view name) {
  for (std::string_view t : k_torch_device_types) {
    if (t == name) return true;
  }
  return false;
}

/// Why a native library among PyTorch's backends is not loaded there.
inline std::string native_in_torch_group(std::string_view backend) {
  return "a native library (no Python module init) in group torch.backends, whose entry points PyTorch "
         "calls as Python callables (stock `import torch` fails on it: \"Failed to load the backend "
         "extension: " +
         std::string(backend) +
         "\"); skipped. A native backend belongs in its host's own group (see epload/backend.h); "
         "for PyTorch, register a Python callable that loads it";
}

/// A device type PyTorch has itself, declared by a backend.
inline std::string torch_device_clash(std::string_view device, std::string_view backend) {
  return "device '" + std::string(device) + "' of backend '" + std::string(backend) +
         "' is PyTorch's own device type '" + std::string(device) +
         "': under torch the backend is never consulted for it (rename the backend's device)";
}

}  // namespace epload::detail
