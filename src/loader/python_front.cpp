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
    out += "Device ";
    out.append(t.device_repr);
    out += " of module ";
    out.append(t.host_repr);
    out += " is unavailable: ";
  }
  out += "Failed to load the backend extension: ";
  out.append(t.name);
  if (!t.value_repr.empty()) {
    out += " (";
    out.append(t.value_repr);
    if (!t.dist_path.empty()) {
      out += " from ";
      out.append(t.dist_path);
    }
    out += ")";
  }
  out += ": ";
  out.append(t.cause);
  out += ". ";
  if (torch_group(t.group)) {
    out += "You can disable extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0, ";
  } else {
    out += "You can disable autoloading of ";
    out.append(t.group_repr);
    out += " with EPLOAD_AUTOLOAD=0, ";
  }
  out += "or this backend alone with EPLOAD_DISABLE=";
  out.append(t.name);
  out += ".";
  return out;
}

std::string pytorch_failure_message(std::string_view group, std::string_view name) {
  return "Failed to load the backend extension: " + std::string(name) +
         ". You can disable extension auto-loading with " +
         (torch_group(group) ? "TORCH_DEVICE_BACKEND_AUTOLOAD" : "EPLOAD_AUTOLOAD") + "=0.";
}

}  // namespace epload
