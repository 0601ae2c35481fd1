// python_front.cpp — the Python front's failure messages (python_front.hpp):
// worded here once, shown by the Python package.
#include "python_front.hpp"

namespace epload {

namespace {

/// The switch that turns autoload off for `group`, as PyTorch's text says.
bool torch_group(std::string_view group) { return group == "torch.backends"; }

}  // namespace

std::string failure_message(const FailureText& t) {
  std::string out;
  if (!t.device_repr.empty()) {
    out = "Device " + std::string(t.device_repr) + " of module " + std::string(t.host_repr) + " is unavailable: ";
  }
  out += "Failed to load the backend extension: " + std::string(t.name);
  if (!t.value_repr.empty()) {
    const std::string from = t.dist_path.empty() ? "" : " from " + std::string(t.dist_path);
    out += " (" + std::string(t.value_repr) + from + ")";
  }
  out += ": " + std::string(t.cause) + ". ";
  out += torch_group(t.group) ? std::string("You can disable extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0, ")
                              : "You can disable autoloading of " + std::string(t.group_repr) + " with EPLOAD_AUTOLOAD=0, ";
  return out + "or this backend alone with EPLOAD_DISABLE=" + std::string(t.name) + ".";
}

std::string pytorch_failure_message(std::string_view group, std::string_view name) {
  return "Failed to load the backend extension: " + std::string(name) +
         ". You can disable extension auto-loading with " +
         (torch_group(group) ? "TORCH_DEVICE_BACKEND_AUTOLOAD" : "EPLOAD_AUTOLOAD") + "=0.";
}

}  // namespace epload
