// switches.cpp — the environment switches (see epload/switches.hpp).
#include "epload/switches.hpp"

#include <algorithm>  // sort, find, any_of
#include <cstdlib>    // getenv

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

bool equals_lower(std::string_view value, std::string_view lower) {
  if (value.size() != lower.size()) return false;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const char c = value[i] >= 'A' && value[i] <= 'Z' ? static_cast<char>(value[i] - 'A' + 'a') : value[i];
    if (c != lower[i]) return false;
  }
  return true;
}

// Characters matched by the Ratcliff-Obershelp rule difflib.SequenceMatcher
// uses: the longest common block (leftmost in a, then in b), then the same
// on both sides of it.  Names are short: quadratic is fine.
std::size_t matched(std::string_view a, std::string_view b) {
  std::size_t best = 0, at_a = 0, at_b = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (std::size_t j = 0; j < b.size(); ++j) {
      std::size_t k = 0;
      while (i + k < a.size() && j + k < b.size() && a[i + k] == b[j + k]) ++k;
      if (k > best) best = k, at_a = i, at_b = j;
    }
  }
  if (best == 0) return 0;
  return best + matched(a.substr(0, at_a), b.substr(0, at_b)) +
         matched(a.substr(at_a + best), b.substr(at_b + best));
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
  } else if (!read_flag("EPLOAD_AUTOLOAD", true, &s.warnings)) {
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

bool read_flag(const char* variable, bool otherwise, std::vector<std::string>* warnings) {
  const char* v = std::getenv(variable);
  if (v == nullptr) return otherwise;
  const std::string_view value(v);
  for (std::string_view on : {"1", "true", "yes", "on"}) {
    if (equals_lower(value, on)) return true;
  }
  for (std::string_view off : {"", "0", "false", "no", "off"}) {
    if (equals_lower(value, off)) return false;
  }
  if (warnings) {
    warnings->push_back(std::string(variable) + "='" + v +
                        "' is not one of 1, true, yes, on, 0, false, no, off: using " + (otherwise ? "1" : "0"));
  }
  return otherwise;
}

std::vector<std::string> close_matches(std::string_view word, const std::vector<std::string>& candidates,
                                       std::size_t n, double cutoff) {
  std::vector<std::pair<double, std::string>> scored;
  for (const std::string& c : candidates) {
    const std::size_t total = word.size() + c.size();
    if (total == 0) continue;
    const double ratio = 2.0 * static_cast<double>(matched(c, word)) / static_cast<double>(total);
    if (ratio >= cutoff) scored.emplace_back(ratio, c);
  }
  std::sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) { return x > y; });
  scored.erase(std::unique(scored.begin(), scored.end()), scored.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < n; ++i) out.push_back(std::move(scored[i].second));
  return out;
}

std::vector<std::string> unmatched_names(const std::vector<std::string>& enable,
                                         const std::vector<std::string>& disable, std::string_view group,
                                         const std::vector<BackendName>& backends) {
  std::vector<std::string> out;
  if (enable.empty() && disable.empty()) return out;
  std::vector<std::string> names;  // what the variables may name: entry points, then distributions
  for (const BackendName& b : backends) names.emplace_back(b.name);
  for (const BackendName& b : backends) {
    if (std::find(names.begin(), names.end(), b.dist) == names.end()) names.emplace_back(b.dist);
  }
  auto check = [&](const char* variable, const std::vector<std::string>& list) {
    for (const std::string& want : list) {
      const bool found = std::any_of(backends.begin(), backends.end(), [&](const BackendName& b) {
        return disabled_by({}, {want}, b.name, b.dist) != nullptr;
      });
      if (found) continue;
      std::string w = std::string(variable) + " names '" + want + "', which is no backend of group '" +
                      std::string(group) + "'";
      const std::vector<std::string> close = close_matches(want, names);
      if (close.empty()) {
        w += " (none is close; `epload devices --group " + std::string(group) + "` lists them)";
      } else {
        w += " (close: ";
        for (std::size_t i = 0; i < close.size(); ++i) w += (i ? ", " : "") + close[i];
        w += ")";
      }
      out.push_back(std::move(w));
    }
  };
  check("EPLOAD_DISABLE", disable);
  check("EPLOAD_ENABLE", enable);
  return out;
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
