// switches.cpp — the environment switches (see epload/switches.hpp).
#include "epload/switches.hpp"

#include <cstdlib>  // getenv

#include "epload/metadata.hpp"  // normalize_name

namespace epload {

namespace {

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const std::size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

// PyTorch's rule: unset or exactly "1" enables.
bool turns_off(const char* variable) {
  const char* v = std::getenv(variable);
  return v != nullptr && std::string_view(v) != "1";
}

/// What the environment says for autoload group `group`.
Switches read_switches(std::string_view group) {
  Switches s;
  if (const char* m = std::getenv("EPLOAD_MODE"); m != nullptr && *m != '\0') {
    if (auto mode = parse_load_mode(m)) {
      s.mode = *mode;
    } else {
      s.warnings.push_back(std::string("EPLOAD_MODE='") + m + "' is not one of lazy, eager, off: using lazy");
    }
  }
  if (group == "torch.backends" && turns_off("TORCH_DEVICE_BACKEND_AUTOLOAD")) {
    s.off_by = "TORCH_DEVICE_BACKEND_AUTOLOAD";
  } else if (turns_off("EPLOAD_AUTOLOAD")) {
    s.off_by = "EPLOAD_AUTOLOAD";
  }
  if (const char* e = std::getenv("EPLOAD_ENABLE"); e != nullptr) s.enable = split_list(e);
  if (const char* d = std::getenv("EPLOAD_DISABLE"); d != nullptr) s.disable = split_list(d);
  return s;
}

}  // namespace

Switches apply_environment(LoaderOptions& options) {
  Switches s = read_switches(options.group);
  options.mode = s.off_by.empty() ? s.mode : LoadMode::off;
  options.enable = s.enable;
  options.disable = s.disable;
  return s;
}

Validation read_validation(std::vector<std::string>* warnings) {
  const char* v = std::getenv("EPLOAD_VALIDATE");
  if (v == nullptr || *v == '\0' || std::string_view(v) == "full") return Validation::full;
  if (std::string_view(v) == "paths") return Validation::paths;
  if (warnings) warnings->push_back(std::string("EPLOAD_VALIDATE='") + v + "' is not one of full, paths: using full");
  return Validation::full;
}

const char* disabled_by(const std::vector<std::string>& enable, const std::vector<std::string>& disable,
                        std::string_view name, std::string_view dist) {
  if (enable.empty() && disable.empty()) return nullptr;
  // Distribution names compare as importlib normalizes them (the one rule,
  // metadata.hpp's normalize_name).
  std::string norm, want_norm;
  normalize_name(dist, norm);
  auto matches = [&](const std::string& want) {
    if (want == name) return true;
    want_norm.clear();
    normalize_name(want, want_norm);
    return want_norm == norm;
  };
  for (const std::string& d : disable) {
    if (matches(d)) return "EPLOAD_DISABLE";
  }
  if (enable.empty()) return nullptr;
  for (const std::string& e : enable) {
    if (matches(e)) return nullptr;
  }
  return "EPLOAD_ENABLE";
}

}  // namespace epload
